//! Where the measured processes come from. An arm's graph is decided in
//! one place ([`layout`]); [`topology`] walks it once, each node started by
//! a launcher ([`launch`]: child processes, or [`containers`]). The nodes
//! themselves: the tiers as child processes ([`process`]) with their
//! command line ([`command`]), a real reverse proxy ([`proxy`], its
//! configuration text in [`proxy_config`]), the
//! balancer in front of the replicas ([`balancer`]), the user-space link
//! emulator ([`link`]), the certificates of a run's TLS hop ([`tls`]).
//! Containers need the image ([`image`]), the `docker` command line
//! ([`docker`]) and a container's state ([`container_state`]); whatever a
//! harness leaves behind is the [`reaper`]'s.
//!
//! Starts, watches and stops processes; measures nothing and renders nothing.

pub mod balancer;
pub mod command;
pub mod container_state;
pub mod containers;
pub mod docker;
pub mod foreign;
pub mod image;
pub mod launch;
pub mod layout;
pub mod link;
pub mod process;
pub mod proxy;
pub mod proxy_config;
pub mod reaper;
pub mod tls;
pub mod topology;

pub use launch::RemoteTier;
pub use process::{TIER_ROLE_ARG, Tier, TierError};
pub use topology::Topology;
