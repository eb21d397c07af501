//! The LEB128 varints of the stored postings (d-gaps, seven bits a byte, low bits first):
//! written by the index builder, checked by the list decoder of [`crate::index::format`] and
//! read again by the cached lists' cursors ([`crate::postings`]).

/// A varint that cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarintError {
    /// The bytes end inside the varint.
    Truncated,
    /// More than five bytes, or a value above `u32::MAX`.
    TooLong,
}

impl std::fmt::Display for VarintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VarintError::Truncated => "truncated varint",
            VarintError::TooLong => "varint too long",
        })
    }
}

/// Appends `v`.
#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads the varint at `*pos` and moves `pos` past it.
#[inline]
pub fn read(bytes: &[u8], pos: &mut usize) -> Result<u32, VarintError> {
    let mut v: u32 = 0;
    let mut shift = 0u32;
    loop {
        let &b = bytes.get(*pos).ok_or(VarintError::Truncated)?;
        *pos += 1;
        let bits = u32::from(b & 0x7f);
        if shift == 28 && bits > 0x0f || shift > 28 {
            return Err(VarintError::TooLong);
        }
        v |= bits << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_is_not_a_u32() {
        for v in [0, 1, 127, 128, 300, 1 << 21, u32::MAX - 1, u32::MAX] {
            let mut out = Vec::new();
            put(&mut out, v);
            let mut pos = 0;
            assert_eq!(read(&out, &mut pos), Ok(v));
            assert_eq!(pos, out.len());
        }
        assert_eq!(read(&[0x80], &mut 0), Err(VarintError::Truncated));
        assert_eq!(read(&[], &mut 0), Err(VarintError::Truncated));
        // 2^32 needs a fifth byte of 0x10; six bytes are too long whatever they hold.
        assert_eq!(
            read(&[0x80, 0x80, 0x80, 0x80, 0x10], &mut 0),
            Err(VarintError::TooLong)
        );
        assert_eq!(
            read(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00], &mut 0),
            Err(VarintError::TooLong)
        );
    }
}
