//! What-if replay: a request trace through a model of an inference service
//! under several scaling policies, compared on GPU-hours and SLO.

pub mod cli;
pub mod compare;
pub mod derive;
pub mod fleet;
pub mod fleet_report;
pub mod fleet_svg;
pub mod frontier;
pub mod idle;
pub mod limits;
pub mod model;
pub mod policy;
pub mod report;
pub mod shared;
pub mod signal;
pub mod sim;
pub mod sleep;
pub mod sweep;
pub mod trace;
