//! Watches: from a resourceVersion (the changes after it, from the log;
//! 410 Gone once it has left the log), or from now with the current
//! objects as ADDED (no resourceVersion, `0`, or `sendInitialEvents`),
//! then live changes; BOOKMARKs when the client allows them.

use std::io::Write;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fields::Fields;
use super::labels::Selector;
use super::request::Request;
use super::response::respond;
use super::store::{Watcher, present, storage};
use super::target::target;
use super::{State, lock, status};

/// How often an idle watch that allows bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(2);
/// A watch without `timeoutSeconds` ends after this (a real server's
/// default is 30–60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

pub(crate) fn wanted(req: &Request) -> bool {
    req.method == "GET" && req.flag("watch") && target(&req.path).is_some_and(|t| t.name.is_none())
}

/// What a watch sends first, and its live feed.
struct Opened {
    first: Vec<Value>,
    events: mpsc::Receiver<Value>,
    kind: String,
    api_version: String,
}

fn open(state: &Mutex<State>, req: &Request) -> Result<Opened, (u16, Value)> {
    let t = target(&req.path).ok_or_else(|| status(404, "NotFound", "not a collection"))?;
    let labels = Selector::parse(&req.param("labelSelector").unwrap_or_default())
        .map_err(|m| status(400, "BadRequest", &m))?;
    let fields = Fields::parse(&req.param("fieldSelector").unwrap_or_default(), &t.gvr.2)
        .map_err(|m| status(400, "BadRequest", &m))?;
    let mut st = lock(state);
    let resource = st.resource(&t.gvr);
    let kind = resource.as_ref().map_or(String::new(), |r| r.kind.clone());
    let api_version = resource.map_or(t.gvr.1.clone(), |r| r.api_version());
    st.watches += 1;
    let (tx, events) = mpsc::channel();
    let watcher = Watcher {
        storage: storage(&t.gvr),
        asked: t.gvr.clone(),
        namespace: t.namespace.clone(),
        labels,
        fields,
        events: tx,
    };
    let from = req
        .param("resourceVersion")
        .filter(|v| !v.is_empty() && v != "0");
    let first = if let (Some(from), false) = (from, req.flag("sendInitialEvents")) {
        let from: u64 = from.parse().map_err(|_| {
            status(
                400,
                "BadRequest",
                &format!("invalid resourceVersion {from:?}"),
            )
        })?;
        if from < st.oldest_resumable() {
            let (_, gone) = status(
                410,
                "Expired",
                &format!(
                    "too old resource version: {from} ({})",
                    st.oldest_resumable() + 1
                ),
            );
            vec![json!({"type": "ERROR", "object": gone})]
        } else {
            st.log
                .iter()
                .filter(|c| c.rv > from && watcher.selects(&c.storage, &c.obj))
                .map(|c| json!({"type": c.kind, "object": present(&t.gvr, &c.obj)}))
                .collect()
        }
    } else {
        let mut first: Vec<Value> = st
            .list(
                &t.gvr,
                t.namespace.as_deref(),
                &watcher.labels,
                &watcher.fields,
            )
            .into_iter()
            .map(|o| json!({"type": "ADDED", "object": o}))
            .collect();
        if req.flag("sendInitialEvents") {
            first.push(bookmark(&kind, &api_version, st.revision, true));
        }
        first
    };
    st.watchers.push(watcher);
    Ok(Opened {
        first,
        events,
        kind,
        api_version,
    })
}

fn bookmark(kind: &str, api_version: &str, rv: u64, initial_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version, "metadata": meta}})
}

/// How a watch writes its events: as objects, or as one-row Tables.
struct Sender<'a> {
    state: &'a Mutex<State>,
    table: Option<super::Gvr>,
}

impl Sender<'_> {
    fn send<W: Write>(&self, w: &mut W, event: &Value) -> bool {
        match &self.table {
            Some(gvr) if event["type"] != "BOOKMARK" && event["type"] != "ERROR" => {
                let mut event = event.clone();
                let obj = event["object"].take();
                event["object"] = super::table::of(&lock(self.state), gvr, &[obj]);
                send(w, &event)
            }
            _ => send(w, event),
        }
    }
}

fn send<W: Write>(w: &mut W, event: &Value) -> bool {
    let line = format!("{event}\n");
    w.write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes())
        .and_then(|()| w.flush())
        .is_ok()
}

pub(crate) fn stream<W: Write>(w: &mut W, state: &Mutex<State>, req: &Request) {
    let opened = match open(state, req) {
        Ok(o) => o,
        Err((code, body)) => {
            let _ = respond(w, code, &body);
            return;
        }
    };
    let out = Sender {
        state,
        table: super::table::wanted(&req.accept)
            .then(|| target(&req.path).map(|t| t.gvr))
            .flatten(),
    };
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    if w.write_all(head.as_bytes()).is_err() || !opened.first.iter().all(|e| out.send(w, e)) {
        return;
    }
    if opened.first.first().is_some_and(|e| e["type"] == "ERROR") {
        let _ = w.write_all(b"0\r\n\r\n");
        return;
    }
    let timeout = req
        .param("timeoutSeconds")
        .and_then(|s| s.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let bookmarks = req.flag("allowWatchBookmarks");
    let end = Instant::now() + timeout;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let wait = if bookmarks {
            left.min(BOOKMARK_EVERY)
        } else {
            left
        };
        let ok = match opened.events.recv_timeout(wait) {
            Ok(event) => out.send(w, &event),
            Err(mpsc::RecvTimeoutError::Timeout) if bookmarks => {
                // Under the lock every change up to `revision` is queued:
                // send those first, so the bookmark promises nothing early.
                let (queued, rv) = {
                    let st = lock(state);
                    (opened.events.try_iter().collect::<Vec<_>>(), st.revision)
                };
                queued.iter().all(|e| out.send(w, e))
                    && send(w, &bookmark(&opened.kind, &opened.api_version, rv, false))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => true,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        if !ok {
            return;
        }
    }
    let _ = w.write_all(b"0\r\n\r\n");
}
