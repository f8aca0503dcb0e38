//! The crate's one error type, and how each variant becomes an HTTP response.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// Everything that can go wrong in the inventory service.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    BadRequest(String),
    #[error("missing or invalid bearer token")]
    Unauthorized,
    #[error("this token may only read")]
    Forbidden,
    /// A Keystone token whose roles map to nothing (the message names the mapped roles).
    #[error("{0}")]
    ForbiddenRole(String),
    /// Keystone did not answer whether a token is valid.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("method not allowed on this path")]
    MethodNotAllowed,
    #[error("request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    #[error("request body must be JSON: send Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("node sync failed: {0}")]
    Sync(String),
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// JSON body of every error response.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for people.
    pub error: String,
    /// The HTTP status code, repeated.
    pub code: u16,
}

impl Error {
    /// HTTP status this error maps to.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::Forbidden | Error::ForbiddenRole(_) => StatusCode::FORBIDDEN,
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::Database(_)
            | Error::Migrate(_)
            | Error::Io(_)
            | Error::Sync(_)
            | Error::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        // Keystone being away is the client's to know (it says which Keystone, never a token).
        let error = if status.is_server_error() && !matches!(self, Error::Unavailable(_)) {
            // Details go to the log, not to the client.
            tracing::error!(error = %self, "request failed");
            "internal error".to_string()
        } else {
            self.to_string()
        };
        let mut resp = (
            status,
            Json(ErrorBody {
                error,
                code: status.as_u16(),
            }),
        )
            .into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}
