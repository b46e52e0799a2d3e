//! Talking to containerd: one gRPC client for the containerd API and CRI v1 over its socket
//! (every call bounded, errors typed by gRPC code), containerd's own config file (v1, v2,
//! v3), OCI image structure, image archives, and the kubelet's view (`pod`: the
//! host-network pod every CRI client of the project builds). Phase 1 never starts the
//! async runtime these need.

pub mod archive;
#[cfg(feature = "grpc")]
pub mod canary;
#[cfg(feature = "grpc")]
pub mod client;
pub mod config;
#[cfg(feature = "grpc")]
pub mod cri;
#[cfg(feature = "grpc")]
pub mod image;
pub mod oci;
#[cfg(feature = "grpc")]
pub mod pod;
pub mod processes;
#[cfg(feature = "grpc")]
pub mod tasks;
