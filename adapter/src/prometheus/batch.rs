//! Many instant queries in one round trip: each query's series are tagged
//! with its index by `label_replace` and the tagged vectors joined by `or`.
//! Prometheus evaluates the same sub-queries it would have evaluated one by
//! one (its work does not change); the adapter saves an HTTP exchange and a
//! JSON answer per key, which is most of its CPU when it polls many keys.
//!
//! Correct for any query that returns an instant vector: the index label
//! makes every sub-query's series distinct, so `or` keeps all of them, and
//! a sub-query with no series simply has no tagged series (its key reads
//! empty, as alone). A scalar cannot be tagged: such keys are read alone.

use super::client::{QueryError, Series};

/// The label that carries a series' sub-query index.
pub const KEY_LABEL: &str = "gpuscale_batch_key";

/// Longest batched query text; longer batches are cut (a query of a few
/// tens of kilobytes parses in well under a millisecond).
pub const MAX_QUERY_BYTES: usize = 64 * 1024;

/// One query for all of `queries`.
pub fn union<S: AsRef<str>>(queries: &[S]) -> String {
    let mut out = String::new();
    for (i, q) in queries.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!(
            "label_replace(({}), \"{KEY_LABEL}\", \"{i}\", \"\", \"\")",
            q.as_ref()
        ));
    }
    out
}

/// The batch's series, split back by sub-query (index → its series, the
/// index label removed). A series without a valid index means the answer
/// is not the batch's: the whole batch is an error.
pub fn split(series: Vec<Series>, n: usize) -> Result<Vec<Vec<Series>>, QueryError> {
    let mut out: Vec<Vec<Series>> = (0..n).map(|_| Vec::new()).collect();
    for mut s in series {
        let i = s
            .labels
            .remove(KEY_LABEL)
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|i| *i < n)
            .ok_or_else(|| {
                QueryError::Decode(format!(
                    "batched answer has a series without a valid {KEY_LABEL} label: {:?}",
                    s.labels
                ))
            })?;
        if let Some(slot) = out.get_mut(i) {
            slot.push(s);
        }
    }
    Ok(out)
}

/// Cut `lens` (the queries' lengths, in order) into batches of at most
/// `max_keys` queries and [`MAX_QUERY_BYTES`] of text: the ranges of each.
pub fn plan(lens: &[usize], max_keys: usize) -> Vec<std::ops::Range<usize>> {
    let max_keys = max_keys.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, len) in lens.iter().enumerate() {
        // label_replace((…), "gpuscale_batch_key", "i", "", "") or
        let cost = len + KEY_LABEL.len() + 40;
        if i > start && (i - start >= max_keys || bytes + cost > MAX_QUERY_BYTES) {
            out.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += cost;
    }
    if start < lens.len() {
        out.push(start..lens.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn series(pairs: &[(&str, &str)], value: f64) -> Series {
        Series {
            labels: labels(pairs),
            value,
        }
    }

    #[test]
    fn tags_each_query_and_joins_them_with_or() {
        let q = union(&["sum(a{x=\"1\"})", "b"]);
        assert_eq!(
            q,
            "label_replace((sum(a{x=\"1\"})), \"gpuscale_batch_key\", \"0\", \"\", \"\") or \
             label_replace((b), \"gpuscale_batch_key\", \"1\", \"\", \"\")"
        );
    }

    #[test]
    fn splits_the_answer_back_and_leaves_empty_keys_empty() {
        let got = split(
            vec![
                series(&[(KEY_LABEL, "2"), ("pod", "p")], 3.0),
                series(&[(KEY_LABEL, "0")], f64::NAN),
            ],
            3,
        )
        .unwrap();
        assert_eq!(got[0].len(), 1);
        assert!(got[0][0].value.is_nan() && got[0][0].labels.is_empty());
        assert!(got[1].is_empty());
        assert_eq!(got[2], vec![series(&[("pod", "p")], 3.0)]);
    }

    #[test]
    fn an_answer_without_the_index_is_refused() {
        assert!(split(vec![series(&[("pod", "p")], 1.0)], 2).is_err());
        assert!(split(vec![series(&[(KEY_LABEL, "2")], 1.0)], 2).is_err());
    }

    #[test]
    fn plans_batches_by_count_and_by_size() {
        assert_eq!(plan(&[10; 5], 2), vec![0..2, 2..4, 4..5]);
        assert_eq!(plan(&[], 2), Vec::<std::ops::Range<usize>>::new());
        let big = MAX_QUERY_BYTES / 2;
        assert_eq!(plan(&[big, big, 10], 100), vec![0..1, 1..3]);
        assert_eq!(plan(&[10; 3], 0), vec![0..1, 1..2, 2..3]);
    }
}
