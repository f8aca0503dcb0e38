//! The deployment description and the service catalog as types; validation. No IO.

pub mod backup;
pub mod catalog;
pub mod distro;
pub mod globals;
pub mod graph;
pub mod labels;
pub mod names;
pub mod release;
pub mod settings;
