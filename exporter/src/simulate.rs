//! `--simulate`: the exporter on a simulated GPU node, the NVML simulator
//! library for NVML and `gpuscale-sim`'s node for the pod mapper's kubelet
//! socket, Kubernetes API and `/proc`. Linked only with the `simulate` cargo
//! feature (on by default, so `cargo run` has it; off in the container
//! image, whose exporter refuses `--simulate`).

use crate::cli::Cli;
use crate::nvml::library::LibSource;
use crate::pods::PodArgs;

#[cfg(feature = "simulate")]
pub use with::{Node, Simulated, library};
#[cfg(not(feature = "simulate"))]
pub use without::{Node, Simulated, library};

#[cfg(feature = "simulate")]
mod with {
    use super::{Cli, LibSource, PodArgs};
    use crate::nvml::library;
    use gpuscale_nvml_sim::scenario::{self, Scenario};
    use gpuscale_sim::node::SimNode;

    /// The scenario `--simulate` runs, validated before anything starts.
    pub struct Simulated(Scenario);

    impl Simulated {
        /// The scenario's node name (the `node` label by default).
        pub fn node(&self) -> &str {
            &self.0.node
        }

        /// Whether the scenario has a `dcgm:` section (a simulated DCGM
        /// host engine for its GPUs without GPM).
        pub fn has_dcgm(&self) -> bool {
            self.0.dcgm.is_some()
        }
    }

    /// The NVML simulator library and its scenario under `--simulate`
    /// (none without it). A bad scenario file is reported with its line
    /// and field.
    pub fn library(cli: &Cli) -> Result<Option<(LibSource, Simulated)>, String> {
        let Some(sim) = &cli.simulate else {
            return Ok(None);
        };
        // `GPUSCALE_SIMULATE=true` (or `1`) is the built-in node, not a file name.
        let builtin = sim.is_empty() || matches!(sim.as_str(), "true" | "1");
        // SAFETY: no other thread exists yet; the simulators read these at init.
        unsafe { std::env::remove_var(scenario::ENV_BUILTIN) };
        let named = scenario::builtin(sim);
        let scenario = if builtin {
            // SAFETY: as above.
            unsafe { std::env::remove_var("GPUSCALE_SIM_SCENARIO") };
            scenario::default_scenario()
        } else if let Some(parsed) = named {
            // A built-in scenario by name (`pre-hopper`), unless a file of that name exists.
            // SAFETY: as above.
            unsafe {
                std::env::remove_var("GPUSCALE_SIM_SCENARIO");
                std::env::set_var(scenario::ENV_BUILTIN, sim);
            }
            parsed.map_err(|e| format!("--simulate {sim}: {e}"))?
        } else {
            let path = std::path::Path::new(sim);
            let loaded = scenario::load(path).map_err(|e| format!("--simulate: {e}"))?;
            let absolute =
                std::fs::canonicalize(path).map_err(|e| format!("--simulate {sim}: {e}"))?;
            // SAFETY: as above.
            unsafe { std::env::set_var("GPUSCALE_SIM_SCENARIO", absolute) };
            loaded
        };
        let exe = std::env::current_exe().ok();
        let found = cli
            .simulator_lib
            .clone()
            .or_else(|| library::find_simulator(exe.as_deref()));
        match found {
            Some(p) if p.is_file() => Ok(Some((LibSource::Path(p), Simulated(scenario)))),
            Some(p) => Err(format!("--simulator-lib {}: no such file", p.display())),
            None => Err(format!(
                "--simulate: cannot find {} next to the executable; build it with `cargo build -p gpuscale-nvml-sim` or pass --simulator-lib",
                library::SIMULATOR_FILE
            )),
        }
    }

    /// The simulated node serving the scenario's pods; its servers stop and
    /// its directory goes when dropped.
    pub struct Node(SimNode);

    impl Node {
        pub fn start(sim: &Simulated, rt: &tokio::runtime::Handle) -> Result<Self, String> {
            SimNode::start(&sim.0, rt)
                .map(Node)
                .map_err(|e| e.to_string())
        }

        /// The pod flags that point the mapper at the node's servers.
        pub fn pod_args(&self) -> PodArgs {
            PodArgs {
                pod_resources_socket: Some(self.0.socket()),
                proc_root: Some(self.0.proc_root()),
                kube_api_url: Some(self.0.api_url()),
                ..PodArgs::default()
            }
        }

        pub fn node_name(&self) -> &str {
            self.0.node_name()
        }
    }
}

#[cfg(not(feature = "simulate"))]
mod without {
    use super::{Cli, LibSource, PodArgs};

    const NO_SIMULATOR: &str = "--simulate: this build has no simulator: build with `--features simulate`, or run gpuscale-sim and point the exporter at its node";

    /// Never made: this build has no simulator.
    pub enum Simulated {}

    impl Simulated {
        pub fn node(&self) -> &str {
            match *self {}
        }

        pub fn has_dcgm(&self) -> bool {
            match *self {}
        }
    }

    /// Refuses `--simulate`.
    pub fn library(cli: &Cli) -> Result<Option<(LibSource, Simulated)>, String> {
        match cli.simulate {
            Some(_) => Err(NO_SIMULATOR.to_owned()),
            None => Ok(None),
        }
    }

    /// Never made: this build has no simulator.
    pub enum Node {}

    impl Node {
        pub fn start(sim: &Simulated, _: &tokio::runtime::Handle) -> Result<Self, String> {
            match *sim {}
        }

        pub fn pod_args(&self) -> PodArgs {
            match *self {}
        }

        pub fn node_name(&self) -> &str {
            match *self {}
        }
    }

    /// As the simulated build's node, which stops its servers when dropped.
    impl Drop for Node {
        fn drop(&mut self) {
            match *self {}
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, library};

    fn cli(args: &[&str]) -> Cli {
        Cli::parse_from(std::iter::once("gpuscale-exporter").chain(args.iter().copied()))
    }

    /// Without `--simulate` nothing is simulated; with it, a build without
    /// the feature says so, and one with it reads the scenario.
    #[test]
    fn simulate_is_read_or_refused_by_the_build() {
        assert!(matches!(library(&cli(&[])), Ok(None)));
        let got = library(&cli(&["--simulate", "no-such-scenario.yaml"])).err();
        let got = got.unwrap_or_default();
        if cfg!(feature = "simulate") {
            assert!(got.contains("no-such-scenario.yaml"), "{got}");
        } else {
            assert!(got.contains("this build has no simulator"), "{got}");
        }
    }
}
