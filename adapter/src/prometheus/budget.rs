//! What the poll cache may hold, in keys and in bytes, and who pays for a
//! key. Keys that a poll asked for (an HPA, the custom metrics API, KEDA's
//! `GetMetrics`/`IsActive`, the scale-to-zero controller) share
//! `--max-cached-queries` and `--max-cached-bytes`; keys that only push
//! streams hold have their own budget (`--keda-max-stream-keys` and a
//! quarter of the bytes), so streams can never lock a poll's new key out.

use crate::provider::MetricValue;

/// Who asked for a key first, and so which budget it counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A request that polls (answered once).
    Poll,
    /// A push stream, which holds the key while it is open.
    Stream,
}

/// Keys and bytes of one pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pool {
    pub keys: usize,
    pub bytes: usize,
}

/// The limits of both pools.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_keys: usize,
    pub max_bytes: usize,
    pub max_stream_keys: usize,
}

/// Why a new key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Keys,
    Bytes,
    StreamKeys,
    StreamBytes,
}

/// Memory of a key besides its strings: the entry, its locks and watch
/// channel, the map slot, the key tuple (an estimate, on the high side).
pub const ENTRY_OVERHEAD: usize = 768;
/// Memory of one cached value besides its label strings.
const VALUE_OVERHEAD: usize = 64;
/// Memory of one label pair besides its strings.
const LABEL_OVERHEAD: usize = 48;

/// The fixed cost of a key: the metric name twice (the map's key and the
/// definition's), the query once (shared by the map's key and the entry),
/// the request's namespace and selector once.
pub fn key_cost(metric: &str, query: &str, namespace: &str, selector: &str) -> usize {
    ENTRY_OVERHEAD + 2 * metric.len() + query.len() + namespace.len() + selector.len()
}

/// The cost of a key's cached values.
pub fn values_cost(items: &[MetricValue]) -> usize {
    items
        .iter()
        .map(|i| {
            VALUE_OVERHEAD
                + i.labels
                    .iter()
                    .map(|(k, v)| LABEL_OVERHEAD + k.len() + v.len())
                    .sum::<usize>()
        })
        .sum()
}

/// Both pools' usage.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub poll: Pool,
    pub stream: Pool,
}

impl Usage {
    fn total_bytes(&self) -> usize {
        self.poll.bytes + self.stream.bytes
    }

    /// Whether a new key of `cost` bytes fits `origin`'s budget: a poll's
    /// key needs a key slot and the bytes left over by both pools; a
    /// stream's key also stays within a quarter of the bytes.
    pub fn admit(&self, origin: Origin, cost: usize, l: &Limits) -> Result<(), Refusal> {
        let over_total = self.total_bytes() + cost > l.max_bytes;
        match origin {
            Origin::Poll if self.poll.keys >= l.max_keys => Err(Refusal::Keys),
            Origin::Poll if over_total => Err(Refusal::Bytes),
            Origin::Poll => Ok(()),
            Origin::Stream if self.stream.keys >= l.max_stream_keys => Err(Refusal::StreamKeys),
            Origin::Stream if over_total || self.stream.bytes + cost > l.max_bytes / 4 => {
                Err(Refusal::StreamBytes)
            }
            Origin::Stream => Ok(()),
        }
    }

    pub fn pool(&mut self, stream: bool) -> &mut Pool {
        if stream {
            &mut self.stream
        } else {
            &mut self.poll
        }
    }
}

impl Refusal {
    /// The 503's message: which budget, which flag, what still works.
    pub fn message(self, metric: &str, l: &Limits) -> String {
        let what = match self {
            Self::Keys => format!(
                "the adapter's poll cache is full ({} keys, --max-cached-queries)",
                l.max_keys
            ),
            Self::Bytes => format!(
                "the adapter's poll cache is at its byte budget ({} bytes, --max-cached-bytes)",
                l.max_bytes
            ),
            Self::StreamKeys => format!(
                "the keys held only by push streams are at their budget ({} keys, --keda-max-stream-keys)",
                l.max_stream_keys
            ),
            Self::StreamBytes => format!(
                "the keys held only by push streams are at their byte budget ({} bytes, a quarter of --max-cached-bytes)",
                l.max_bytes / 4
            ),
        };
        format!(
            "metric {metric}: {what}; a new (metric, namespace, selector) is refused until idle keys expire \
             (--idle-expiry) or streams close, keys already cached are served"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        max_keys: 10,
        max_bytes: 10_000,
        max_stream_keys: 4,
    };

    #[test]
    fn streams_never_take_a_polls_room() {
        let mut u = Usage {
            stream: Pool {
                keys: 3,
                bytes: 2_400,
            },
            ..Usage::default()
        };
        assert_eq!(u.admit(Origin::Stream, 200, &L), Err(Refusal::StreamBytes));
        assert_eq!(u.admit(Origin::Stream, 100, &L), Ok(()));
        u.stream.keys = 4;
        assert_eq!(u.admit(Origin::Stream, 1, &L), Err(Refusal::StreamKeys));
        // Three quarters of the bytes and every key slot are the polls'.
        assert_eq!(u.admit(Origin::Poll, 7_600, &L), Ok(()));
        assert_eq!(u.admit(Origin::Poll, 7_601, &L), Err(Refusal::Bytes));
        u.poll.keys = 10;
        assert_eq!(u.admit(Origin::Poll, 1, &L), Err(Refusal::Keys));
    }
}
