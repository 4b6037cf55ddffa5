//! Live processes through the real nvml-wrapper: a process written to the
//! live directory is listed and counted in the GPU's used memory; its
//! memory drops when it sleeps and it is gone when removed, while NVML
//! stays initialised.
#![allow(clippy::unwrap_used)]

use gpuscale_nvml_sim::live;
use nvml_wrapper::enums::device::UsedGpuMemory;

const GPU: &str = "GPU-00000000-0000-4000-8000-0000000000aa";
const SCENARIO: &str = r#"
node: test-node
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-0000000000aa
    pci_bus_id: "00000000:18:00.0"
    memory_mib: 81559
    processes:
      - { pid: 100, name: trainer, memory_mib: 6000 }
"#;
const MIB: u64 = 1024 * 1024;

#[test]
fn a_live_process_comes_changes_its_memory_and_goes() {
    let s = crate::common::Session::new(Some(SCENARIO), Some(10.0));
    let dir = s.dir.path().join("live");
    // SAFETY: the session holds the tests' environment lock.
    unsafe { std::env::set_var(live::ENV_LIVE, &dir) };
    let nvml = s.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let pids = || -> Vec<(u32, UsedGpuMemory)> {
        let ps = d.running_compute_processes().unwrap();
        ps.into_iter().map(|p| (p.pid, p.used_gpu_memory)).collect()
    };
    let used = || d.memory_info().unwrap().used / MIB;
    assert_eq!(pids(), [(100, UsedGpuMemory::Used(6000 * MIB))]);
    assert_eq!(used(), 6000);

    live::write(&dir, GPU, 50_016, 24_576).unwrap();
    assert_eq!(pids().len(), 2);
    assert_eq!(used(), 6000 + 24_576);
    // The model server sleeps: its VRAM goes back.
    live::write(&dir, GPU, 50_016, 2_458).unwrap();
    assert_eq!(pids()[1], (50_016, UsedGpuMemory::Used(2_458 * MIB)));
    assert_eq!(used(), 6000 + 2_458);
    live::remove(&dir, GPU, 50_016).unwrap();
    assert_eq!(pids().len(), 1);
    assert_eq!(used(), 6000);
    drop(nvml);
    // SAFETY: as above.
    unsafe { std::env::remove_var(live::ENV_LIVE) };
}
