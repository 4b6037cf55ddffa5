//! The current exposition, swapped whole after each collection. `/metrics`
//! reads it without locks and never waits for NVML.

use std::io::Write as _;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;

use crate::metrics::encode::Format;

pub struct Snapshot {
    text: Bytes,
    openmetrics: Bytes,
    // Compressed on the first request that asks for it, once per snapshot.
    text_gz: OnceLock<Bytes>,
    openmetrics_gz: OnceLock<Bytes>,
    /// A collection with NVML up has completed.
    pub ready: bool,
}

impl Snapshot {
    pub fn new(text: Vec<u8>, openmetrics: Vec<u8>, ready: bool) -> Self {
        Self {
            text: Bytes::from(text),
            openmetrics: Bytes::from(openmetrics),
            text_gz: OnceLock::new(),
            openmetrics_gz: OnceLock::new(),
            ready,
        }
    }

    pub fn body(&self, format: Format, gzip: bool) -> Bytes {
        let (plain, gz) = match format {
            Format::Text => (&self.text, &self.text_gz),
            Format::OpenMetrics => (&self.openmetrics, &self.openmetrics_gz),
        };
        if !gzip {
            return plain.clone();
        }
        gz.get_or_init(|| compress(plain)).clone()
    }
}

fn compress(data: &[u8]) -> Bytes {
    let mut enc = GzEncoder::new(Vec::with_capacity(data.len() / 6), Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    Bytes::from(enc.finish().unwrap_or_default())
}

pub struct Store {
    current: ArcSwap<Snapshot>,
}

impl Store {
    pub fn new() -> Arc<Self> {
        let empty = Snapshot::new(Vec::new(), b"# EOF\n".to_vec(), false);
        Arc::new(Self {
            current: ArcSwap::from_pointee(empty),
        })
    }

    pub fn load(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    pub fn publish(&self, snapshot: Snapshot) {
        self.current.store(Arc::new(snapshot));
    }
}
