use super::*;

fn entry(index: u32, uuid: &str, pci: &str) -> Entry {
    Entry {
        index,
        uuid: uuid.into(),
        pci_bus_id: pci.into(),
        model: "NVIDIA H100 80GB HBM3".into(),
    }
}

/// A fresh directory per test (removed first: a pid can repeat).
fn tempdir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("gpuscale-inventory-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tempdir");
    dir
}

fn reported(uuids: &[&str]) -> BTreeSet<Arc<str>> {
    uuids.iter().map(|u| Arc::from(*u)).collect()
}

#[test]
fn a_lost_gpu_keeps_its_uuid_across_a_restart() {
    let dir = tempdir("t1");
    let path = dir.join("state.json");
    let mut first = Inventory::load(Some(path.clone()));
    first.observe(entry(0, "GPU-a", "00000000:18:00.0"));
    first.observe(entry(1, "GPU-b", "00000000:2A:00.0"));
    first.save();
    let restarted = Inventory::load(Some(path));
    assert_eq!(restarted.uuid_at(1).as_deref(), Some("GPU-b"));
    assert_eq!(restarted.uuid_at(7), None);
    let view = restarted.view(&reported(&["GPU-a", "GPU-b"]));
    assert_eq!(view.expected, Some(2));
    assert_eq!(view.file_ok, Some(true));
    assert!(view.missing.is_empty());
}

#[test]
fn a_gpu_not_reported_is_missing() {
    let dir = tempdir("t2");
    let path = dir.join("state.json");
    let mut inv = Inventory::load(Some(path.clone()));
    inv.observe(entry(0, "GPU-a", "00000000:18:00.0"));
    inv.observe(entry(1, "GPU-b", "00000000:2A:00.0"));
    inv.save();
    let inv = Inventory::load(Some(path));
    let view = inv.view(&reported(&["GPU-a"]));
    assert_eq!(
        view.missing,
        vec![Missing {
            index: 1,
            uuid: Arc::from("GPU-b")
        }]
    );
}

#[test]
fn indexes_shifted_by_a_short_boot_name_no_lost_gpu() {
    let mut inv = Inventory::load(None);
    inv.observe(entry(0, "GPU-a", "00000000:18:00.0"));
    inv.observe(entry(1, "GPU-b", "00000000:2A:00.0"));
    inv.observe(entry(2, "GPU-c", "00000000:3A:00.0"));
    // After a reboot without GPU-b, GPU-c answers at index 1.
    let mut inv = Inventory {
        seen: BTreeSet::new(),
        ..inv
    };
    inv.observe(entry(1, "GPU-c", "00000000:3A:00.0"));
    // GPU-c answered at 1 this run: it is the GPU there, not GPU-b.
    assert_eq!(inv.uuid_at(1).as_deref(), Some("GPU-c"));
    assert_eq!(inv.uuid_at(2), None);
    let view = inv.view(&reported(&["GPU-a", "GPU-c"]));
    assert_eq!(view, View::default(), "no state file, no view");
}

#[test]
fn a_corrupt_file_is_rebuilt() {
    let dir = tempdir("t3");
    let path = dir.join("state.json");
    for bad in ["{not json", "", "{\"version\": 9, \"gpus\": []}", "[1,2]"] {
        std::fs::write(&path, bad).expect("write");
        let mut inv = Inventory::load(Some(path.clone()));
        assert_eq!(inv.uuid_at(0), None, "{bad:?}");
        inv.observe(entry(0, "GPU-a", "00000000:18:00.0"));
        inv.save();
        let text = std::fs::read_to_string(&path).expect("rewritten");
        assert!(text.contains("GPU-a"), "{bad:?} not replaced: {text}");
    }
}

#[test]
fn duplicate_entries_are_dropped() {
    let dir = tempdir("t4");
    let path = dir.join("state.json");
    let text = r#"{"version":1,"gpus":[
        {"index":0,"uuid":"GPU-a","pci_bus_id":"00000000:18:00.0","model":"m"},
        {"index":1,"uuid":"GPU-b","pci_bus_id":"00000000:18:00.0","model":"m"},
        {"index":2,"uuid":"","pci_bus_id":"00000000:3A:00.0","model":"m"}]}"#;
    std::fs::write(&path, text).expect("write");
    let inv = Inventory::load(Some(path));
    assert_eq!(inv.view(&reported(&[])).expected, Some(1));
}

#[test]
fn an_unwritable_file_is_reported_and_retried() {
    let dir = tempdir("t5");
    // A directory where the file should be: never writable.
    let path = dir.join("state.json");
    std::fs::create_dir(&path).expect("mkdir");
    let mut inv = Inventory::load(Some(path.clone()));
    inv.observe(entry(0, "GPU-a", "00000000:18:00.0"));
    inv.save();
    assert_eq!(inv.view(&reported(&["GPU-a"])).file_ok, Some(false));
    std::fs::remove_dir(&path).expect("rmdir");
    inv.save();
    assert_eq!(inv.view(&reported(&["GPU-a"])).file_ok, Some(true));
    assert!(
        std::fs::read_to_string(&path)
            .expect("written")
            .contains("GPU-a")
    );
}

#[test]
fn without_a_file_nothing_is_shown() {
    let mut inv = Inventory::load(None);
    inv.observe(entry(0, "GPU-a", "00000000:18:00.0"));
    inv.save();
    assert_eq!(inv.view(&reported(&[])), View::default());
}
