//! The library through its C ABI, as a DCGM client calls it: loaded with
//! dlopen, versioned structures, a host engine that goes away.
#![allow(clippy::unwrap_used)]

use std::ffi::CStr;
use std::path::PathBuf;

use gpuscale_dcgm_abi::functions as c;
use gpuscale_dcgm_abi::*;
use gpuscale_dcgm_sim::hostengine::HostEngine;
use libloading::{Library, Symbol};

fn lib_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    for dir in exe.ancestors().skip(1).take(3) {
        let p = dir.join(gpuscale_dcgm_sim::LIBRARY_FILE);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{} not found next to {}",
        gpuscale_dcgm_sim::LIBRARY_FILE,
        exe.display()
    );
}

fn params(version: u32) -> dcgmConnectV2Params_v2 {
    dcgmConnectV2Params_v2 {
        version,
        persistAfterDisconnect: 0,
        timeoutMs: 1000,
        addressIsUnixSocket: 0,
    }
}

#[test]
fn a_client_connects_reads_the_pre_hopper_node_and_sees_the_host_engine_go() {
    assert!(matches!(
        gpuscale_nvml_sim::scenario::builtin("pre-hopper"),
        Some(Ok(_))
    ));
    // SAFETY: the only test in this binary that touches the environment.
    unsafe { std::env::set_var("GPUSCALE_SIM_BUILTIN", "pre-hopper") };
    // SAFETY: the simulator has no initialisers with preconditions.
    let lib = unsafe { Library::new(lib_path()) }.unwrap();
    // SAFETY: each symbol is the DCGM function with the declared signature.
    unsafe {
        let init: Symbol<c::dcgmInit> = lib.get(b"dcgmInit\0").unwrap();
        let connect: Symbol<c::dcgmConnect_v2> = lib.get(b"dcgmConnect_v2\0").unwrap();
        let devices: Symbol<c::dcgmGetAllSupportedDevices> =
            lib.get(b"dcgmGetAllSupportedDevices\0").unwrap();
        let groups: Symbol<c::dcgmProfGetSupportedMetricGroups> =
            lib.get(b"dcgmProfGetSupportedMetricGroups\0").unwrap();
        let latest: Symbol<c::dcgmEntitiesGetLatestValues> =
            lib.get(b"dcgmEntitiesGetLatestValues\0").unwrap();
        let error: Symbol<c::errorString> = lib.get(b"errorString\0").unwrap();
        assert_eq!(init(), DCGM_ST_OK);
        let engine = HostEngine::start("127.0.0.1:0").unwrap();
        let addr = std::ffi::CString::new(engine.addr().to_string()).unwrap();
        let mut h = 0usize;
        let mut old = params(dcgmConnectV2Params_version2 - 1);
        assert_eq!(
            connect(addr.as_ptr(), &mut old, &mut h),
            DCGM_ST_VER_MISMATCH
        );
        let mut p = params(dcgmConnectV2Params_version2);
        assert_eq!(connect(addr.as_ptr(), &mut p, &mut h), DCGM_ST_OK);
        let mut ids = [0u32; DCGM_MAX_NUM_DEVICES];
        let mut n = 0i32;
        assert_eq!(devices(h, ids.as_mut_ptr(), &mut n), DCGM_ST_OK);
        assert_eq!(&ids[..n as usize], &[0, 1, 2, 3]);
        let mut q: Box<dcgmProfGetMetricGroups_v3> = Box::new_zeroed().assume_init();
        q.version = dcgmProfGetMetricGroups_version3;
        q.gpuId = 2;
        assert_eq!(groups(h, &mut *q), DCGM_ST_OK);
        let g0 = &q.metricGroups[0];
        assert_eq!((g0.majorId, g0.minorId), (0, 0));
        assert_eq!(
            &g0.fieldIds[..g0.numFieldIds as usize],
            &[1001, 1002, 1003, 1004, 1005]
        );
        let e = [dcgmGroupEntityPair_t {
            entityGroupId: DCGM_FE_GPU,
            entityId: 2,
        }];
        let fields = [DCGM_FI_DEV_UUID, 1002];
        let mut out = vec![std::mem::zeroed::<dcgmFieldValue_v2>(); 2];
        assert_eq!(
            latest(h, e.as_ptr(), 1, fields.as_ptr(), 2, 0, out.as_mut_ptr()),
            DCGM_ST_OK
        );
        assert_eq!(out[1].status, DCGM_ST_NOT_WATCHED, "not watched, not live");
        assert_eq!(out[0].version, dcgmFieldValue_version2);
        assert_eq!(
            latest(h, e.as_ptr(), 1, fields.as_ptr(), 2, 1, out.as_mut_ptr()),
            DCGM_ST_OK
        );
        let uuid = CStr::from_bytes_until_nul(&out[0].value.0).unwrap();
        assert_eq!(
            uuid.to_str().unwrap(),
            "GPU-14000020-0000-4000-8000-000000000000"
        );
        let sm = f64::from_ne_bytes(out[1].value.0[..8].try_into().unwrap());
        assert!((sm - 0.62).abs() < 1e-12, "live SM_ACTIVE of the L4: {sm}");
        engine.stop();
        let rc = devices(h, ids.as_mut_ptr(), &mut n);
        assert_eq!(rc, DCGM_ST_CONNECTION_NOT_VALID);
        let msg = CStr::from_ptr(error(rc)).to_str().unwrap();
        assert!(msg.contains("host engine"), "{msg}");
    }
}
