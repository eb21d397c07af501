//! Synthetic but word-like term names: unique, pronounceable, lowercase ASCII letters, so
//! the tokenizer keeps each one as exactly one term and never merges two.
//!
//! A vocabulary index is written in bijective base 90 with one consonant–vowel syllable per
//! digit (`0 → "ba"`, `1 → "be"`, …, `90 → "baba"`): small indices, given to popular words,
//! make short words. Novel words (one-off terms such as typos and names) are a syllable
//! string followed by a final consonant, so they never collide with vocabulary words, which
//! always end in a vowel.

const ONSETS: &[u8; 18] = b"bdfghjklmnprstvwyz";
const VOWELS: &[u8; 5] = b"aeiou";
const FINALS: &[u8; 8] = b"nrstlmkx";
const BASE: u64 = (ONSETS.len() * VOWELS.len()) as u64;

/// Appends the syllables of `index` (bijective base 90, most significant first).
fn push_syllables(index: u64, out: &mut String) {
    let mut digits = [0u8; 16];
    let mut len = 0;
    // Bijective numeration of index + 1: every string of syllables is used exactly once.
    let mut m = u128::from(index) + 1;
    while m > 0 {
        m -= 1;
        digits[len] = (m % u128::from(BASE)) as u8;
        len += 1;
        m /= u128::from(BASE);
    }
    for &d in digits[..len].iter().rev() {
        let d = usize::from(d);
        out.push(char::from(ONSETS[d / VOWELS.len()]));
        out.push(char::from(VOWELS[d % VOWELS.len()]));
    }
}

/// Appends the vocabulary word with index `index`.
pub(crate) fn push_vocab_word(index: u64, out: &mut String) {
    push_syllables(index, out);
}

/// Appends the novel word with index `index`.
pub(crate) fn push_novel_word(index: u64, out: &mut String) {
    let n = FINALS.len() as u64;
    push_syllables(index / n, out);
    out.push(char::from(FINALS[(index % n) as usize]));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashSet;

    fn vocab(i: u64) -> String {
        let mut s = String::new();
        push_vocab_word(i, &mut s);
        s
    }

    fn novel(i: u64) -> String {
        let mut s = String::new();
        push_novel_word(i, &mut s);
        s
    }

    #[test]
    fn short_words_first() {
        assert_eq!(vocab(0), "ba");
        assert_eq!(vocab(1), "be");
        assert_eq!(vocab(89), "zu");
        assert_eq!(vocab(90), "baba");
        assert_eq!(novel(0), "ban");
        assert_eq!(novel(9), "ber");
        assert!(vocab(u64::MAX).len() <= 32);
    }

    #[test]
    fn unique_and_disjoint() {
        let mut seen = FxHashSet::default();
        for i in 0..20_000 {
            assert!(seen.insert(vocab(i)));
            assert!(seen.insert(novel(i)));
        }
        for i in [1u64 << 40, (1 << 40) + 1, u64::MAX - 1, u64::MAX] {
            assert!(seen.insert(vocab(i)));
            assert!(seen.insert(novel(i)));
        }
        for w in &seen {
            assert_eq!(crate::tokenizer::tokenize(w), vec![w.clone()]);
        }
    }
}
