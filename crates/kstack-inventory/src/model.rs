//! Request and response bodies of the REST API (a versioned boundary: change with care).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "lowercase")]
        pub enum $name { $($variant),+ }

        impl $name {
            /// The text stored in the database and sent over the wire.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses the stored text.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

text_enum!(
    /// What a host does.
    Personality { Controller = "controller", Compute = "compute", Storage = "storage" }
);
text_enum!(
    /// Administrative state: a locked host runs no workloads and may change roles.
    Administrative { Locked = "locked", Unlocked = "unlocked" }
);
text_enum!(
    /// Operational state as last reported.
    Operational { Enabled = "enabled", Disabled = "disabled" }
);

text_enum!(
    /// Whether the host's Kubernetes node has the host's labels and lock state.
    SyncState { Pending = "pending", Synced = "synced", Failed = "failed" }
);

/// A host in the inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Host {
    pub uuid: String,
    pub hostname: String,
    pub personality: Personality,
    pub administrative: Administrative,
    pub operational: Operational,
    pub created_at: String,
    pub updated_at: Option<String>,
    /// `synced`: the node has the host's labels and lock state. `pending`: a change is not
    /// pushed yet, or there is no node of this name yet (it gets the state when it joins).
    /// `failed`: the last push failed; `sync_reason` says why, and the audit retries.
    pub sync_state: SyncState,
    /// Why the host is `pending` or `failed`; null when `synced`.
    pub sync_reason: Option<String>,
    /// When `sync_state` or `sync_reason` last changed.
    pub sync_changed_at: Option<String>,
    /// What the host is doing, for people; null when nothing. A compute host's lock moves
    /// its instances off first: `locking: ...` while it does (the host stays unlocked until
    /// they are all gone), `lock failed: ...` when it could not (the host stays unlocked, its
    /// compute service enabled again).
    #[serde(default)]
    pub task: Option<String>,
}

/// Body of `POST /v1/ihosts`. A new host is unlocked and disabled unless told otherwise:
/// registering a host whose node already runs pods must not evict them. Pass
/// `"administrative": "locked"` to register it locked, which taints its node
/// `services=disabled:NoExecute` and so evicts every pod there that does not tolerate it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HostCreate {
    pub hostname: String,
    pub personality: Personality,
    /// Default `unlocked`. `locked` evicts the pods on the host's node (see above).
    #[serde(default)]
    pub administrative: Option<Administrative>,
    /// Default `disabled`.
    #[serde(default)]
    pub operational: Option<Operational>,
}

/// Body of `PATCH /v1/ihosts/{uuid}`: only the fields present change.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HostPatch {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub personality: Option<Personality>,
    #[serde(default)]
    pub administrative: Option<Administrative>,
    #[serde(default)]
    pub operational: Option<Operational>,
}

/// Response of `GET /v1/ihosts`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HostList {
    pub ihosts: Vec<Host>,
}

/// A label assigned to a host (StarlingX shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Label {
    pub uuid: String,
    pub host_uuid: String,
    pub label_key: String,
    pub label_value: String,
}

/// Response of label listing and assignment.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LabelList {
    pub labels: Vec<Label>,
}
