//! The Kubernetes API server on the wire, as clients other than kubectl
//! use it: watches that resume, bookmark and expire, the hooks a simulated
//! node drives, selectors, conflicts.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;

use gpuscale_sim::kubeapi::{Cluster, Gvr, KubeFake, core};
use serde_json::{Value, json};

fn fake() -> KubeFake {
    KubeFake::start_bare(Cluster::default()).expect("start")
}

fn pod(name: &str, app: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "a", "labels": {"app": app}},
        "spec": {"nodeName": node}})
}

/// One request on its own connection: (status, JSON body).
fn call(f: &KubeFake, method: &str, path: &str, body: Option<(&str, &Value)>) -> (u16, Value) {
    send(f, method, path, "", body)
}

/// [`call`] with more header lines (each ending in `\r\n`).
fn send(
    f: &KubeFake,
    method: &str,
    path: &str,
    headers: &str,
    body: Option<(&str, &Value)>,
) -> (u16, Value) {
    let mut conn = TcpStream::connect(("127.0.0.1", f.port)).expect("connect");
    let (ct, text) = body.map_or((String::new(), String::new()), |(ct, b)| {
        (format!("Content-Type: {ct}\r\n"), b.to_string())
    });
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}{ct}Content-Length: {}\r\n\r\n{text}",
        text.len()
    )
    .expect("send");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("answer");
    let code = answer[9..12].parse().expect("status code");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, serde_json::from_str(body).expect("JSON"))
}

fn get(f: &KubeFake, path: &str) -> (u16, Value) {
    call(f, "GET", path, None)
}

/// Opens a watch; events are read with [`next`].
fn watch(f: &KubeFake, path: &str) -> BufReader<TcpStream> {
    let mut conn = TcpStream::connect(("127.0.0.1", f.port)).expect("connect");
    write!(conn, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    while line.trim_end() != "" || line.is_empty() {
        line.clear();
        r.read_line(&mut line).expect("headers");
    }
    r
}

/// The next event (type, object), or None when the stream ends.
fn next(r: &mut BufReader<TcpStream>) -> Option<(String, Value)> {
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        // Chunk-size lines are hex numbers; events are objects.
        if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(line.trim()) {
            return Some((v["type"].as_str()?.to_string(), v["object"].clone()));
        }
        if line.trim() == "0" {
            return None;
        }
    }
}

#[test]
fn lists_by_label_and_field_selectors_and_answers_statuses() {
    let f = fake();
    f.put(&core("pods"), pod("x-0", "x", "n1"));
    f.put(&core("pods"), pod("y-0", "y", "n2"));
    let (code, list) = get(
        &f,
        "/api/v1/namespaces/a/pods?labelSelector=app%20in%20(x%2Cz)",
    );
    assert_eq!((code, list["kind"].as_str()), (200, Some("PodList")));
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(list["items"][0]["metadata"]["name"], "x-0");
    let (_, list) = get(&f, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn2");
    assert_eq!(list["items"][0]["metadata"]["name"], "y-0");
    let (code, st) = get(&f, "/api/v1/pods?fieldSelector=spec.image%3Dx");
    assert_eq!(
        (code, st["message"].as_str()),
        (400, Some("field label not supported: spec.image"))
    );
    let (code, st) = get(&f, "/api/v1/namespaces/a/pods/nope");
    assert_eq!((code, st["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(
        st["details"],
        json!({"name": "nope", "group": "", "kind": "pods"})
    );
    let (code, st) = get(&f, "/api/v1/namespaces/a/pods?labelSelector=app%20in%20(");
    assert_eq!((code, st["reason"].as_str()), (400, Some("BadRequest")));
    let (code, _) = get(&f, "/api/v1/nodes/x-0/pods");
    assert_eq!(code, 404, "a path that names no resource");
    let (code, cm) = get(
        &f,
        "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
    );
    assert_eq!((code, cm["kind"].as_str()), (200, Some("ConfigMap")));
}

#[test]
fn a_watch_streams_matching_events_and_resumes_from_a_lists_version() {
    let f = fake();
    let mut w = watch(
        &f,
        "/api/v1/namespaces/a/pods?watch=true&labelSelector=app%3Dx&timeoutSeconds=10",
    );
    f.put(&core("pods"), pod("y-0", "y", "n"));
    f.put(&core("pods"), pod("x-0", "x", "n"));
    let (_, list) = get(&f, "/api/v1/namespaces/a/pods");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    f.delete(&core("pods"), "a", "x-0");
    assert_eq!(next(&mut w).map(|e| e.0), Some("ADDED".into()));
    assert_eq!(next(&mut w).map(|e| e.0), Some("DELETED".into()));
    // A client that listed at `rv` misses nothing that came after.
    let mut resumed = watch(
        &f,
        &format!("/api/v1/namespaces/a/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
    );
    let (kind, obj) = next(&mut resumed).expect("the delete");
    assert_eq!(
        (kind.as_str(), &obj["metadata"]["name"]),
        ("DELETED", &json!("x-0"))
    );
    assert_eq!(next(&mut resumed), None, "ends at timeoutSeconds");
}

#[test]
fn a_watch_bookmarks_and_a_too_old_version_is_gone() {
    let f = fake();
    let mut w = watch(
        &f,
        "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=1&timeoutSeconds=5",
    );
    let (kind, obj) = next(&mut w).expect("a bookmark");
    assert_eq!(
        (kind.as_str(), obj["kind"].as_str()),
        ("BOOKMARK", Some("Pod"))
    );
    for i in 0..8200 {
        f.put(
            &core("configmaps"),
            json!({"metadata": {"name": format!("c{i}"), "namespace": "a"}}),
        );
    }
    let mut old = watch(&f, "/api/v1/pods?watch=1&resourceVersion=2");
    let (kind, obj) = next(&mut old).expect("an error");
    assert_eq!(
        (kind.as_str(), obj["code"].as_i64(), obj["reason"].as_str()),
        ("ERROR", Some(410), Some("Expired"))
    );
}

#[test]
fn replace_conflicts_on_a_stale_version_and_generation_follows_the_spec() {
    let f = fake();
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "a"}, "spec": {"replicas": 1}});
    let path = "/apis/apps/v1/namespaces/a/deployments";
    let (code, made) = call(&f, "POST", path, Some(("application/json", &deploy)));
    assert_eq!(
        (code, made["metadata"]["generation"].as_i64()),
        (201, Some(1))
    );
    let (code, st) = call(&f, "POST", path, Some(("application/json", &deploy)));
    assert_eq!((code, st["reason"].as_str()), (409, Some("AlreadyExists")));
    let nameless = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}});
    let (code, st) = call(&f, "POST", path, Some(("application/json", &nameless)));
    assert_eq!((code, st["reason"].as_str()), (422, Some("Invalid")));
    let mut stale = made.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let (code, st) = call(
        &f,
        "PUT",
        &format!("{path}/d"),
        Some(("application/json", &stale)),
    );
    assert_eq!((code, st["reason"].as_str()), (409, Some("Conflict")));
    let status = json!({"status": {"readyReplicas": 1}});
    let (_, after) = call(
        &f,
        "PATCH",
        &format!("{path}/d/status"),
        Some(("application/merge-patch+json", &status)),
    );
    assert_eq!(
        (
            after["status"]["readyReplicas"].as_i64(),
            after["metadata"]["generation"].as_i64()
        ),
        (Some(1), Some(1))
    );
    let spec = json!({"spec": {"replicas": 2}, "status": {"readyReplicas": 9}});
    let (_, after) = call(
        &f,
        "PATCH",
        &format!("{path}/d"),
        Some(("application/merge-patch+json", &spec)),
    );
    assert_eq!(after["metadata"]["generation"], 2);
    assert_eq!(
        after["status"]["readyReplicas"], 1,
        "status moves only through /status"
    );
    let (code, st) = call(
        &f,
        "PATCH",
        &format!("{path}/d"),
        Some(("text/plain", &spec)),
    );
    assert_eq!(
        (code, st["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
}

fn slices() -> Gvr {
    (
        "resource.k8s.io".into(),
        "v1".into(),
        "resourceslices".into(),
    )
}

#[test]
fn node_hooks_drive_pods_slices_versions_and_outages() {
    let f = fake();
    f.apply_pod(&pod("p", "x", "n")).expect("a pod");
    let mut w = watch(
        &f,
        "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn&resourceVersion=1&timeoutSeconds=5",
    );
    assert_eq!(next(&mut w).map(|e| e.0), Some("ADDED".into()));
    let mut again = pod("p", "x", "n");
    again["metadata"]["uid"] = json!("another");
    f.apply_pod(&again).expect("the pod recreated");
    assert_eq!(next(&mut w).map(|e| e.0), Some("DELETED".into()));
    assert_eq!(
        next(&mut w).map(|e| (e.0, e.1["metadata"]["uid"].clone())),
        Some(("ADDED".into(), json!("another")))
    );
    assert!(f.pod("a", "p").is_some());
    f.apply_slice(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "s"}, "spec": {"nodeName": "n", "devices": [{"name": "gpu-0", "attributes": {"a": {"string": "b"}}}]}}));
    f.set_resource_versions(&["v1beta1"]);
    let (code, list) = get(
        &f,
        "/apis/resource.k8s.io/v1beta1/resourceslices?fieldSelector=spec.nodeName%3Dn",
    );
    assert_eq!(code, 200);
    assert_eq!(
        list["items"][0]["spec"]["devices"][0]["basic"]["attributes"]["a"]["string"],
        "b"
    );
    assert_eq!(get(&f, "/apis/resource.k8s.io/v1/resourceslices").0, 404);
    f.delete_slices();
    assert!(f.get(&slices(), "", "s").is_none());
    f.set_down(true);
    assert_eq!(next(&mut w), None, "an outage ends watches");
    assert_eq!(get(&f, "/api/v1/pods").0, 503);
    f.set_down(false);
    assert_eq!(get(&f, "/api/v1/pods").0, 200);
    let (lists, watches) = f.list_watch_counts();
    assert!(
        lists >= 2 && watches == 1,
        "{lists} lists, {watches} watches"
    );
}

#[test]
fn deleting_an_owner_deletes_its_dependents() {
    let f = fake();
    let owner = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "a", "uid": "rs-uid"}});
    f.put(&("apps".into(), "v1".into(), "replicasets".into()), owner);
    let mut child = pod("rs-1", "x", "n");
    child["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid"}]);
    f.put(&core("pods"), child);
    assert_eq!(
        call(
            &f,
            "DELETE",
            "/apis/apps/v1/namespaces/a/replicasets/rs",
            None
        )
        .0,
        200
    );
    assert!(f.pod("a", "rs-1").is_none());
}

/// A rustls client (what kube-rs uses) trusts the kubeconfig's CA for
/// 127.0.0.1, and the HTTPS side wants the bearer token.
#[test]
fn https_is_trusted_through_the_ca_and_wants_the_token() {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let f = fake();
    let mut roots = rustls::RootCertStore::empty();
    let ca = CertificateDer::from_pem_slice(f.ca_pem().as_bytes()).expect("CA PEM");
    roots.add(ca).expect("CA");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let ask = |token: &str| {
        let name = "127.0.0.1".try_into().expect("server name");
        let session = rustls::ClientConnection::new(std::sync::Arc::new(config.clone()), name)
            .expect("session");
        let tcp = TcpStream::connect(("127.0.0.1", f.tls_port)).expect("connect");
        let mut tls = rustls::StreamOwned::new(session, tcp);
        write!(tls, "GET /version HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n").expect("send");
        let mut answer = String::new();
        let _ = tls.read_to_string(&mut answer);
        answer
    };
    assert!(
        ask(f.token()).starts_with("HTTP/1.1 200"),
        "{}",
        ask(f.token())
    );
    assert!(ask("wrong").starts_with("HTTP/1.1 401"));
    assert!(f.tls_kubeconfig().contains("certificate-authority-data: "));
}

/// A streaming list (`sendInitialEvents`): the current objects, then a
/// bookmark that marks their end.
#[test]
fn a_streaming_list_ends_its_initial_events_with_a_bookmark() {
    let f = fake();
    f.put(&core("pods"), pod("a-0", "x", "n"));
    let mut w = watch(
        &f,
        "/api/v1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=5",
    );
    let (kind, obj) = next(&mut w).expect("the pod");
    assert_eq!(
        (kind.as_str(), &obj["metadata"]["name"]),
        ("ADDED", &json!("a-0"))
    );
    let (kind, obj) = next(&mut w).expect("the bookmark");
    assert_eq!(kind, "BOOKMARK");
    assert_eq!(
        obj["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

/// A metadata-only list (`as=PartialObjectMetadataList`, what client-go's
/// metadata client and kube's `list_metadata` ask for) carries each item's
/// metadata and nothing else.
#[test]
fn a_metadata_list_carries_only_metadata() {
    let f = fake();
    f.put(&core("pods"), pod("p1", "web", "n1"));
    let accept = "Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1\r\n";
    let (code, list) = send(&f, "GET", "/api/v1/namespaces/a/pods", accept, None);
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    let item = &list["items"][0];
    assert_eq!(item["kind"], "PartialObjectMetadata");
    assert_eq!(item["metadata"]["labels"]["app"], "web");
    assert!(item.get("spec").is_none(), "{item}");
}

#[test]
fn a_list_is_paged_by_limit_and_continue_and_an_old_token_expires() {
    let f = fake();
    for i in 0..7 {
        f.put(
            &core("configmaps"),
            json!({"metadata": {"name": format!("c{i}"), "namespace": "a"}}),
        );
    }
    let mut names = Vec::new();
    let mut path = "/api/v1/namespaces/a/configmaps?limit=3".to_string();
    let mut pages = 0;
    let first_token = loop {
        let (code, page) = get(&f, &path);
        assert_eq!(code, 200, "{page}");
        pages += 1;
        let items = page["items"].as_array().expect("items");
        assert!(items.len() <= 3, "{page}");
        names.extend(items.iter().map(|o| o["metadata"]["name"].clone()));
        match page["metadata"]["continue"].as_str() {
            Some(token) => {
                let left = page["metadata"]["remainingItemCount"].as_u64();
                assert_eq!(left, Some(7 - names.len() as u64), "{page}");
                path = format!("/api/v1/namespaces/a/configmaps?limit=3&continue={token}");
                if pages == 1 {
                    continue;
                }
                break path.clone();
            }
            None => unreachable!("two pages of three and more to come"),
        }
    };
    let (_, last) = get(&f, &first_token);
    names.extend(
        last["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|o| o["metadata"]["name"].clone()),
    );
    assert!(last["metadata"]["continue"].is_null(), "{last}");
    assert_eq!(
        names,
        (0..7).map(|i| json!(format!("c{i}"))).collect::<Vec<_>>()
    );
    for i in 0..8200 {
        f.put(
            &core("configmaps"),
            json!({"metadata": {"name": format!("d{i}"), "namespace": "b"}}),
        );
    }
    let (code, gone) = get(&f, &first_token);
    assert_eq!(
        (code, gone["reason"].as_str()),
        (410, Some("Expired")),
        "{gone}"
    );
}
