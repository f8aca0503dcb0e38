//! The one crate that names the `k8s-openapi` version feature (Kubernetes 1.36).
//!
//! Every other crate imports Kubernetes types through this re-export, so moving to a newer
//! Kubernetes API is a one-line change here.
pub use k8s_openapi;
pub use k8s_openapi::api;
pub use k8s_openapi::apimachinery;
