//! Term dictionary: a bijection between normalized term strings and dense `u32` ids.
//!
//! Dense ids let the simulator and the caches keep per-term state in plain vectors instead
//! of hash maps (the libCacheSim habit of integer object ids). Ids are assigned in order of
//! first appearance, so a dictionary built from the same log is always the same.

use rustc_hash::FxHashMap;

/// Interns terms as dense ids `0..len()`.
#[derive(Clone, Debug, Default)]
pub struct TermDict {
    ids: FxHashMap<Box<str>, u32>,
    terms: Vec<Box<str>>,
}

impl TermDict {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `term`, assigning the next free id on first sight.
    ///
    /// # Panics
    /// Never in practice: more than `u32::MAX` distinct terms would be needed.
    pub fn intern(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.ids.get(term) {
            return id;
        }
        let id = u32::try_from(self.terms.len()).expect("more than 2^32 distinct terms");
        let boxed: Box<str> = term.into();
        self.terms.push(boxed.clone());
        self.ids.insert(boxed, id);
        id
    }

    /// The id of `term` if it is known.
    pub fn get(&self, term: &str) -> Option<u32> {
        self.ids.get(term).copied()
    }

    /// The term of `id`.
    pub fn term(&self, id: u32) -> &str {
        &self.terms[id as usize]
    }

    /// All terms in id order.
    pub fn terms(&self) -> impl ExactSizeIterator<Item = &str> {
        self.terms.iter().map(|t| &**t)
    }

    /// Number of distinct terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// True when no term was interned.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_and_stable() {
        let mut d = TermDict::new();
        assert_eq!(d.intern("b"), 0);
        assert_eq!(d.intern("a"), 1);
        assert_eq!(d.intern("b"), 0);
        assert_eq!(d.get("a"), Some(1));
        assert_eq!(d.get("c"), None);
        assert_eq!(d.term(1), "a");
        assert_eq!(d.len(), 2);
        assert_eq!(d.terms().collect::<Vec<_>>(), vec!["b", "a"]);
    }
}
