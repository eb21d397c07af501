//! Property-based fuzzing of the tokenizer (issue 12): on any text, and on any bytes read as
//! text, it never panics and agrees with a plain reference model of its rules: lowercase
//! alphanumeric terms, each at most `MAX_TERM_BYTES`, de-duplicated in order of first
//! appearance, at most `MAX_TERMS` of them. Run long with `BALLOT_FUZZ_CASES=1000000`.

#[path = "support/fuzz.rs"]
mod fuzz;

use data::tokenizer::{tokenize, Tokens, MAX_TERMS, MAX_TERM_BYTES};
use proptest::prelude::*;

/// The rules, written as plainly as possible.
fn reference(query: &str) -> (Vec<String>, bool) {
    let mut terms: Vec<String> = Vec::new();
    let mut distinct = 0;
    for piece in query.split(|c: char| !c.is_alphanumeric()) {
        let term: String = piece
            .chars()
            .flat_map(char::to_lowercase)
            .filter(|c| c.is_alphanumeric())
            .collect();
        if term.is_empty() || term.len() > MAX_TERM_BYTES || terms.contains(&term) {
            continue;
        }
        distinct += 1;
        if terms.len() < MAX_TERMS {
            terms.push(term);
        } else {
            // The tokenizer stops at the first term past the limit.
            return (terms, true);
        }
    }
    let truncated = distinct > MAX_TERMS;
    (terms, truncated)
}

/// Checks every invariant of one tokenization.
fn check(query: &str, reused: &mut Tokens) -> Result<(), TestCaseError> {
    let mut fresh = Tokens::new();
    fresh.tokenize(query);
    let terms: Vec<&str> = fresh.iter().collect();
    prop_assert!(terms.len() <= MAX_TERMS);
    for (i, t) in terms.iter().enumerate() {
        prop_assert!(!t.is_empty() && t.len() <= MAX_TERM_BYTES, "term {t:?}");
        prop_assert!(
            t.chars()
                .all(|c| c.is_alphanumeric() && c.to_lowercase().eq([c])),
            "term {t:?} is not lowercase alphanumeric"
        );
        prop_assert!(!terms[..i].contains(t), "duplicate {t:?}");
    }
    let (want, truncated) = reference(query);
    prop_assert_eq!(&terms, &want.iter().map(String::as_str).collect::<Vec<_>>());
    prop_assert_eq!(fresh.truncated(), truncated);
    prop_assert_eq!(fresh.normalized(), terms.join(" "));
    // A reused buffer gives the same answer, and tokenizing the terms again changes nothing.
    reused.tokenize(query);
    prop_assert_eq!(reused.iter().collect::<Vec<_>>(), terms.clone());
    prop_assert_eq!(tokenize(fresh.normalized()), want);
    Ok(())
}

/// Characters that stress the rules: separators, digits, case pairs whose lowercase has
/// another length, combining marks, scripts without case, and anything else.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::sample::select(vec![
            'a', 'Z', '0', '9', ' ', '-', '_', '.', '+', '%', '\t', '\n', '\0',
            'İ', 'Ⱥ', 'ẞ', 'ß', 'Σ', 'ς', 'K', 'Å', 'ǅ', 'ﬃ', '\u{307}', '\u{301}',
            '東', '京', 'ا', '١', '²', '½', 'Ⅻ', '𝔸', '😀', '\u{200b}', '\u{feff}',
        ]),
        2 => any::<char>(),
        1 => prop::char::range('\u{80}', '\u{2fff}'),
    ]
}

proptest! {
    #![proptest_config(fuzz::config(2_000))]

    #[test]
    fn any_text(query in any::<String>()) {
        check(&query, &mut Tokens::new())?;
    }

    #[test]
    fn tricky_text(chars in prop::collection::vec(tricky_char(), 0..400)) {
        let query: String = chars.into_iter().collect();
        check(&query, &mut Tokens::new())?;
    }

    #[test]
    fn any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        check(&String::from_utf8_lossy(&bytes), &mut Tokens::new())?;
    }

    #[test]
    fn many_terms_and_long_terms(
        words in prop::collection::vec(("[a-cİȺ]{1,3}", 0usize..3), 0..80),
        long in (MAX_TERM_BYTES - 8)..(MAX_TERM_BYTES + 8),
        wide in any::<bool>(),
    ) {
        // Up to 80 short words from a tiny alphabet (many duplicates), then one term near
        // the length limit, of 1- or (lowercased) 3-byte characters.
        let mut query: Vec<String> = words
            .into_iter()
            .map(|(w, sep)| format!("{w}{}", [" ", "--", "İ."][sep]))
            .collect();
        query.push(if wide { "Ⱥ".repeat(long / 3) } else { "a".repeat(long) });
        let mut reused = Tokens::new();
        reused.tokenize("warm the buffer with something else entirely");
        check(&query.concat(), &mut reused)?;
    }
}
