//! The wire: HTTP/1.1 keep-alive connections (plain or TLS), one thread
//! each; a watch streams chunked JSON events on its connection until
//! `timeoutSeconds`, the client leaves, or the server goes down.

use std::io::{BufRead as _, BufReader, Read, Write};
use std::sync::Mutex;

use super::request::Request;
use super::response::{respond, respond_warned};
use super::{State, lock, status};

/// Request bodies larger than this are refused (413).
const MAX_BODY: usize = 16 << 20;

/// Why a request could not be read (the connection then closes).
enum ReadError {
    Closed,
    TooLarge,
}

fn read_line<R: Read>(r: &mut BufReader<R>) -> Result<String, ReadError> {
    let mut line = String::new();
    match r.read_line(&mut line) {
        Ok(0) | Err(_) => Err(ReadError::Closed),
        Ok(_) => Ok(line),
    }
}

fn read_body<R: Read>(
    r: &mut BufReader<R>,
    len: usize,
    chunked: bool,
) -> Result<Vec<u8>, ReadError> {
    if !chunked {
        if len > MAX_BODY {
            return Err(ReadError::TooLarge);
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).map_err(|_| ReadError::Closed)?;
        return Ok(body);
    }
    let mut body = Vec::new();
    loop {
        let size = read_line(r)?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
            .map_err(|_| ReadError::Closed)?;
        if body.len() + size > MAX_BODY {
            return Err(ReadError::TooLarge);
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])
            .map_err(|_| ReadError::Closed)?;
        read_line(r)?;
        if size == 0 {
            return Ok(body);
        }
    }
}

fn read_request<R: Read>(reader: &mut BufReader<R>) -> Result<Request, ReadError> {
    let line = read_line(reader)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(ReadError::Closed);
    };
    let (mut len, mut close, mut chunked) = (0usize, false, false);
    let (mut content_type, mut accept, mut token) = (String::new(), String::new(), None);
    loop {
        let h = read_line(reader)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let Some((k, v)) = h.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => len = v.parse().map_err(|_| ReadError::Closed)?,
            "connection" => close = v.eq_ignore_ascii_case("close"),
            "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
            "content-type" => content_type = v.to_ascii_lowercase(),
            "accept" => accept = v.to_string(),
            "authorization" => token = v.strip_prefix("Bearer ").map(str::to_string),
            _ => {}
        }
    }
    let body = read_body(reader, len, chunked)?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        content_type,
        accept,
        body,
        close,
        token,
        warnings: std::cell::RefCell::default(),
    })
}

/// Serve one connection; `token` is the bearer token required (HTTPS).
pub(crate) fn serve<S: Read + Write>(conn: S, state: &Mutex<State>, token: Option<&str>) {
    let mut reader = BufReader::new(conn);
    loop {
        let req = match read_request(&mut reader) {
            Ok(req) => req,
            Err(ReadError::TooLarge) => {
                let (code, body) = status(413, "RequestEntityTooLarge", "request body too large");
                let _ = respond(reader.get_mut(), code, &body);
                return;
            }
            Err(ReadError::Closed) => return,
        };
        let (code, body) = {
            let mut st = lock(state);
            st.remember(format!("{} {}?{}", req.method, req.path, req.query));
            if st.down {
                status(503, "ServiceUnavailable", "the API server is down")
            } else if token.is_some() && req.token.as_deref() != token {
                status(401, "Unauthorized", "Unauthorized")
            } else if super::watch::wanted(&req) {
                drop(st);
                super::watch::stream(reader.get_mut(), state, &req);
                return;
            } else {
                super::verbs::answer(&req, &mut st)
            }
        };
        let warnings = req.warnings.take();
        if respond_warned(reader.get_mut(), code, &body, &warnings).is_err() || req.close {
            return;
        }
    }
}
