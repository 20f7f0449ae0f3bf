//! Where the measured processes come from: the tiers as child processes
//! ([`process`]), one arm's set of them ([`topology`]), a real reverse
//! proxy on one hop ([`proxy`]), the balancer in front of the downstream's
//! replicas ([`balancer`]), the tiers in Docker containers
//! ([`containers`]), the user-space link emulator in front of a tier
//! ([`link`]), the certificates of a run's TLS hop ([`tls`]), and the one
//! place a tier's command line is built ([`command`]).
//!
//! Starts, watches and stops processes; measures nothing and renders nothing.

pub mod balancer;
pub mod command;
pub mod containers;
pub mod link;
pub mod process;
pub mod proxy;
pub mod tls;
pub mod topology;

pub use process::{TIER_ROLE_ARG, Tier, TierError};
pub use topology::{RemoteTier, Topology};
