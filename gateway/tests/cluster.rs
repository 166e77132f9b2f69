//! The Redis cluster against a real `redis-server`: two or three [`Cluster`]s in one process,
//! each with a fake worker standing in for the registry.
//!
//! [`Cluster`]: cancelkit_gateway::cluster::Cluster

#[path = "cluster/basics.rs"]
mod basics;
#[path = "cluster/fake.rs"]
mod fake;
#[path = "cluster/outage.rs"]
mod outage;
#[path = "cluster/restart.rs"]
mod restart;
