//! Property-based fuzzing of the query-string decoder both servers use (issue 12): on any
//! query string and any limit it never panics and never returns a `q` over the limit or
//! blank; every string encoded by `form_urlencoded` (or escaped byte by byte) decodes back;
//! and where it accepts a value, `form_urlencoded`'s lenient parser reads the same value.
//! Run long with `BALLOT_FUZZ_CASES=1000000`.

#[path = "support/fuzz.rs"]
mod fuzz;

use data::query::{decode, extract_q, params, QueryError, MAX_QUERY_BYTES};
use proptest::prelude::*;

/// Checks `extract_q` and `params` on `qs` with `limit`.
fn check(qs: &str, limit: usize) -> Result<(), TestCaseError> {
    match extract_q(Some(qs), limit) {
        Ok(q) => {
            prop_assert!(q.len() <= limit, "{} bytes over {limit}", q.len());
            prop_assert!(!q.trim().is_empty());
            // The first `q` is the one decoded, and the lenient parser agrees with it.
            let first = params(qs).find(|p| p.key == "q").expect("a q");
            let again = first.value(limit);
            prop_assert_eq!(again.as_deref(), Ok(q.as_str()));
            let lenient = form_urlencoded::parse(format!("q={}", first.raw).as_bytes())
                .next()
                .map(|(_, v)| v.into_owned());
            prop_assert_eq!(lenient.as_deref(), Some(q.as_str()));
        }
        Err(QueryError::Missing) => prop_assert!(params(qs).all(|p| p.key != "q")),
        Err(QueryError::TooLong(n)) => prop_assert_eq!(n, limit),
        Err(_) => {}
    }
    for p in params(qs) {
        prop_assert!(!p.key.contains('&') && !p.raw.contains('&'));
        if let Ok(v) = p.value(limit) {
            prop_assert!(v.len() <= limit);
        }
    }
    Ok(())
}

/// Query strings from an alphabet where the decoder's cases are likely.
fn query_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(vec![
                "q", "=", "&", "%", "+", "k", "a", "Z", "0", "9", "f", "F", "g", " ", "%2", "%C3",
                "%A9", "%FF", "%zz", "%00", "%20", "%2B", "%26", "%3D", "é", "東", "\u{0}",
            ])
            .prop_map(str::to_owned),
            1 => any::<String>(),
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(fuzz::config(2_000))]

    #[test]
    fn any_query_string(qs in any::<String>(), limit in 0usize..=MAX_QUERY_BYTES + 8) {
        check(&qs, limit)?;
        prop_assert!(extract_q(None, limit) == Err(QueryError::Missing));
    }

    #[test]
    fn tricky_query_strings(qs in query_string(), limit in prop_oneof![0usize..16, Just(MAX_QUERY_BYTES)]) {
        check(&qs, limit)?;
    }

    #[test]
    fn encoded_strings_round_trip(
        q in any::<String>().prop_filter("not blank", |s| !s.trim().is_empty()),
        before in "[a-p]{0,3}(=[a-z%0-9]{0,4})?",
        after in "[a-z]{0,3}=[^&]{0,8}",
        every_byte in any::<bool>(),
    ) {
        let encoded: String = if every_byte {
            q.bytes().map(|b| format!("%{b:02X}")).collect()
        } else {
            form_urlencoded::byte_serialize(q.as_bytes()).collect()
        };
        let qs = format!("{before}&q={encoded}&{after}&q=second");
        let limit = MAX_QUERY_BYTES;
        let got = extract_q(Some(&qs), limit);
        if q.len() <= limit {
            prop_assert_eq!(got, Ok(q.clone()));
        } else {
            prop_assert_eq!(got, Err(QueryError::TooLong(limit)));
        }
        let exact = decode(&encoded, q.len());
        prop_assert_eq!(exact.as_deref(), Ok(q.as_str()));
    }

    #[test]
    fn long_values_are_cut_at_the_limit(n in 0usize..3 * MAX_QUERY_BYTES, escaped in any::<bool>()) {
        let raw = if escaped { "%41".repeat(n) } else { "a".repeat(n) };
        match decode(&raw, MAX_QUERY_BYTES) {
            Ok(v) => prop_assert!(n <= MAX_QUERY_BYTES && v.len() == n),
            Err(e) => prop_assert!(n > MAX_QUERY_BYTES && e == QueryError::TooLong(MAX_QUERY_BYTES)),
        }
    }
}
