//! Tables over virtual homes: a voting table that serves any replica count.
//!
//! A plain table has one column per replica, so it serves only the replica count it was
//! trained for. A *homes table* votes for V virtual homes instead (its `replica` column holds
//! a home `h < V`, and `ballot.replicas` is V, so a build that does not know homes refuses it
//! as a V-replica table rather than serving it wrongly). Its metadata says how the homes were
//! trained onto replicas and how much work each carries:
//!
//! - `ballot.virtual_homes.replicas`: the replica count R0 it was trained for;
//! - `ballot.virtual_homes.trained`: comma-separated, the replica (`< R0`) of each home, V entries;
//! - `ballot.virtual_homes.work`: comma-separated, each home's work in the training replay (in
//!   the units of the load bound), V entries;
//! - optionally `ballot.virtual_homes.work.N` for other replica counts N: each home's work
//!   measured with the homes mapped onto N replicas, V entries.
//!
//! The balancer maps the homes onto the replicas it has (`balancer::virtual_homes`), the way
//! consistent hashing maps virtual nodes, and compiles an ordinary table for that count.

use std::collections::BTreeMap;
use std::path::Path;

use super::TableError;

/// Metadata key of the replica count a homes table was trained for.
pub const KEY_VHOMES_REPLICAS: &str = "ballot.virtual_homes.replicas";
/// Metadata key of the trained replica of each home.
pub const KEY_VHOMES_TRAINED: &str = "ballot.virtual_homes.trained";
/// Metadata key of each home's work; with `.N` appended, its work on N replicas.
pub const KEY_VHOMES_WORK: &str = "ballot.virtual_homes.work";

/// What a homes table says about its homes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtualHomes {
    /// The replica count R0 the table was trained for.
    pub replicas: u16,
    /// The replica of each home in training (`trained[h] < replicas`); its length is V.
    pub trained: Vec<u16>,
    /// Each home's work; its length is V.
    pub work: Vec<u64>,
    /// Each home's work measured on other replica counts (count → V entries).
    pub work_at: BTreeMap<u16, Vec<u64>>,
}

impl VirtualHomes {
    /// Number of homes V.
    pub fn homes(&self) -> usize {
        self.trained.len()
    }

    /// The homes' work to balance on `replicas` replicas: measured there if the table says,
    /// else as trained.
    pub fn work_for(&self, replicas: usize) -> &[u64] {
        u16::try_from(replicas)
            .ok()
            .and_then(|n| self.work_at.get(&n))
            .unwrap_or(&self.work)
    }

    /// Writes the three keys into `metadata`.
    pub fn insert_into(&self, metadata: &mut BTreeMap<String, String>) {
        let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(",");
        metadata.insert(KEY_VHOMES_REPLICAS.into(), self.replicas.to_string());
        metadata.insert(
            KEY_VHOMES_TRAINED.into(),
            list(&mut self.trained.iter().map(u16::to_string)),
        );
        metadata.insert(
            KEY_VHOMES_WORK.into(),
            list(&mut self.work.iter().map(u64::to_string)),
        );
        for (n, work) in &self.work_at {
            metadata.insert(
                format!("{KEY_VHOMES_WORK}.{n}"),
                list(&mut work.iter().map(u64::to_string)),
            );
        }
    }

    /// Reads the homes of a table of `homes` columns from its metadata: `None` for a plain
    /// table, an error naming `path` and the key for a homes table whose keys are missing,
    /// malformed or inconsistent.
    pub fn from_metadata(
        metadata: &BTreeMap<String, String>,
        homes: u16,
        path: &Path,
    ) -> Result<Option<VirtualHomes>, TableError> {
        let keys = [KEY_VHOMES_REPLICAS, KEY_VHOMES_TRAINED, KEY_VHOMES_WORK];
        if keys.iter().all(|k| !metadata.contains_key(*k)) {
            return Ok(None);
        }
        let err = |detail: String| TableError::Metadata {
            path: path.to_owned(),
            detail,
        };
        let get = |key: &str| {
            metadata
                .get(key)
                .ok_or_else(|| err(format!("a homes table needs metadata {key}")))
        };
        let replicas_text = get(KEY_VHOMES_REPLICAS)?;
        let replicas: u16 = replicas_text
            .trim()
            .parse()
            .ok()
            .filter(|&r| r >= 1 && r <= homes)
            .ok_or_else(|| {
                err(format!(
                    "metadata {KEY_VHOMES_REPLICAS} = {replicas_text:?} is not a replica count in 1..={homes}"
                ))
            })?;
        let trained: Vec<u16> = parse_list(get(KEY_VHOMES_TRAINED)?, KEY_VHOMES_TRAINED, &err)?;
        let work: Vec<u64> = parse_list(get(KEY_VHOMES_WORK)?, KEY_VHOMES_WORK, &err)?;
        for (key, len) in [
            (KEY_VHOMES_TRAINED, trained.len()),
            (KEY_VHOMES_WORK, work.len()),
        ] {
            if len != usize::from(homes) {
                return Err(err(format!(
                    "metadata {key} lists {len} homes but the table has {homes}"
                )));
            }
        }
        let mut work_at = BTreeMap::new();
        let prefix = format!("{KEY_VHOMES_WORK}.");
        for (key, value) in metadata.range(prefix.clone()..) {
            let Some(n) = key.strip_prefix(&prefix) else {
                break;
            };
            let count: u16 = n
                .parse()
                .ok()
                .filter(|&c| c >= 1)
                .ok_or_else(|| err(format!("metadata {key}: {n:?} is not a replica count")))?;
            let list: Vec<u64> = parse_list(value, key, &err)?;
            if list.len() != usize::from(homes) {
                return Err(err(format!(
                    "metadata {key} lists {} homes but the table has {homes}",
                    list.len()
                )));
            }
            work_at.insert(count, list);
        }
        if let Some((h, &r)) = trained.iter().enumerate().find(|&(_, &r)| r >= replicas) {
            return Err(err(format!(
                "metadata {KEY_VHOMES_TRAINED} puts home {h} on replica {r}, but the table was \
                 trained for {replicas} replicas"
            )));
        }
        Ok(Some(VirtualHomes {
            replicas,
            trained,
            work,
            work_at,
        }))
    }
}

fn parse_list<T: std::str::FromStr>(
    text: &str,
    key: &str,
    err: &dyn Fn(String) -> TableError,
) -> Result<Vec<T>, TableError> {
    text.split(',')
        .enumerate()
        .map(|(i, v)| {
            v.trim()
                .parse()
                .map_err(|_| err(format!("metadata {key}: entry {i} ({v:?}) is not a number")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn homes() -> VirtualHomes {
        VirtualHomes {
            replicas: 2,
            trained: vec![0, 0, 1, 1],
            work: vec![5, 0, 7, 3],
            work_at: BTreeMap::from([(3, vec![4, 1, 6, 2])]),
        }
    }

    fn read(m: &BTreeMap<String, String>) -> Result<Option<VirtualHomes>, TableError> {
        VirtualHomes::from_metadata(m, 4, Path::new("t.parquet"))
    }

    #[test]
    fn homes_round_trip_through_metadata_and_a_plain_table_has_none() {
        let mut m = BTreeMap::new();
        assert_eq!(read(&m).unwrap(), None);
        homes().insert_into(&mut m);
        assert_eq!(m[KEY_VHOMES_TRAINED], "0,0,1,1");
        assert_eq!(m["ballot.virtual_homes.work.3"], "4,1,6,2");
        let back = read(&m).unwrap().unwrap();
        assert_eq!(back, homes());
        assert_eq!(
            (back.work_for(3), back.work_for(2)),
            (&[4, 1, 6, 2][..], &[5, 0, 7, 3][..])
        );
    }

    #[test]
    fn inconsistent_homes_are_refused_with_the_key_named() {
        let cases: [(&str, &str, &str); 7] = [
            (
                KEY_VHOMES_TRAINED,
                "0,0,1",
                "lists 3 homes but the table has 4",
            ),
            (KEY_VHOMES_TRAINED, "0,0,2,1", "puts home 2 on replica 2"),
            (
                KEY_VHOMES_WORK,
                "5,x,7,3",
                "entry 1 (\"x\") is not a number",
            ),
            (KEY_VHOMES_REPLICAS, "9", "not a replica count in 1..=4"),
            (KEY_VHOMES_REPLICAS, "0", "not a replica count in 1..=4"),
            (
                "ballot.virtual_homes.work.3",
                "1,2",
                "lists 2 homes but the table has 4",
            ),
            (
                "ballot.virtual_homes.work.x",
                "1,2,3,4",
                "\"x\" is not a replica count",
            ),
        ];
        for (key, value, expected) in cases {
            let mut m = BTreeMap::new();
            homes().insert_into(&mut m);
            m.insert(key.into(), value.into());
            let e = read(&m).unwrap_err().to_string();
            assert!(
                e.contains(expected) && e.contains("t.parquet"),
                "{key}={value}: {e}"
            );
        }
        let mut m = BTreeMap::new();
        homes().insert_into(&mut m);
        m.remove(KEY_VHOMES_WORK);
        let e = read(&m).unwrap_err().to_string();
        assert!(
            e.contains("needs metadata ballot.virtual_homes.work"),
            "{e}"
        );
    }
}
