//! An answer on the wire: one HTTP/1.1 response with a JSON body.

use std::io::Write;

use serde_json::Value;

pub(crate) fn respond<W: Write>(w: &mut W, code: u16, body: &Value) -> std::io::Result<()> {
    respond_warned(w, code, body, &[])
}

/// The answer with one `Warning` header per warning, as kube-apiserver
/// writes them (RFC 7234 code 299, agent `-`, the text quoted).
pub(crate) fn respond_warned<W: Write>(
    w: &mut W,
    code: u16,
    body: &Value,
    warnings: &[String],
) -> std::io::Result<()> {
    let text = body.to_string();
    let headers: String = warnings
        .iter()
        .map(|m| format!("Warning: 299 - {}\r\n", quoted(m)))
        .collect();
    let all = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}\r\n{text}",
        reason(code),
        text.len()
    );
    // One write: several would each wait for the client's delayed ACK.
    w.write_all(all.as_bytes())?;
    w.flush()
}

/// A warning's text as a quoted string: `"` and `\\` escaped, and no
/// control character (a header is one line).
fn quoted(m: &str) -> String {
    let mut out = String::from('"');
    for c in m.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        503 => "Service Unavailable",
        _ => "Error",
    }
}
