//! A scrape target whose exposition the test (or a load tool) rewrites at
//! will: Prometheus scrapes whatever text is current.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// The text served; clones share it.
#[derive(Clone)]
pub struct Series(Arc<Mutex<String>>);

impl Series {
    /// Serves `initial` on a free loopback port; returns the port too.
    pub fn serve(initial: &str) -> (Self, u16) {
        let series = Series(Arc::new(Mutex::new(initial.to_string())));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind series");
        let port = listener.local_addr().expect("addr").port();
        let body = series.clone();
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                let mut buf = [0u8; 2048];
                let _ = conn.read(&mut buf);
                let text = body.0.lock().map(|s| s.clone()).unwrap_or_default();
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
        });
        (series, port)
    }

    /// Replaces the text; the next scrape sees it.
    pub fn set(&self, text: &str) {
        if let Ok(mut s) = self.0.lock() {
            *s = text.to_string();
        }
    }
}
