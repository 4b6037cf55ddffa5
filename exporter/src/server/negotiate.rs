//! Content negotiation for `/metrics`.

use crate::metrics::encode::Format;

/// OpenMetrics when the client prefers it (as Prometheus does), else text 0.0.4.
pub fn format(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Text;
    };
    let (mut om, mut text) = (0.0f32, 0.0f32);
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut q = 1.0f32;
        for p in parts {
            if let Some(v) = p.strip_prefix("q=") {
                q = v.parse().unwrap_or(0.0);
            }
        }
        match media.as_str() {
            "application/openmetrics-text" => om = om.max(q),
            "text/plain" | "text/*" | "*/*" => text = text.max(q),
            _ => {}
        }
    }
    if om > 0.0 && om >= text {
        Format::OpenMetrics
    } else {
        Format::Text
    }
}

/// Whether the client accepts gzip.
pub fn gzip(accept_encoding: Option<&str>) -> bool {
    accept_encoding.is_some_and(|v| {
        v.split(',').any(|c| {
            let mut parts = c.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let refused = parts
                .any(|p| p.strip_prefix("q=").and_then(|q| q.parse::<f32>().ok()) == Some(0.0));
            name.eq_ignore_ascii_case("gzip") && !refused
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_accept_header_gets_openmetrics() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(format(Some(prom)), Format::OpenMetrics);
        assert_eq!(format(Some("text/plain;version=0.0.4")), Format::Text);
        assert_eq!(format(None), Format::Text);
        assert_eq!(format(Some("*/*")), Format::Text);
        assert_eq!(
            format(Some("application/openmetrics-text;q=0,text/plain")),
            Format::Text
        );
    }

    #[test]
    fn gzip_tokens() {
        assert!(gzip(Some("gzip, deflate")));
        assert!(gzip(Some("br;q=1.0, GZIP;q=0.5")));
        assert!(!gzip(Some("gzip;q=0")));
        assert!(!gzip(Some("identity")));
        assert!(!gzip(None));
    }
}
