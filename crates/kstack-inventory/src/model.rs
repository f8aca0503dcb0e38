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
}

/// Body of `POST /v1/ihosts`. New hosts start locked and disabled unless told otherwise.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HostCreate {
    pub hostname: String,
    pub personality: Personality,
    #[serde(default)]
    pub administrative: Option<Administrative>,
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
