//! `x-message`: a params definition that names its message, so the generated module ties method,
//! params and result together (`request::SessionPrompt: cancelkit_protocol::Request`), as
//! `lsp-types` does.
//!
//! ```json
//! "PromptRequestParams": {
//!   "x-method": "session/prompt",
//!   "x-message": {"kind": "request", "name": "SessionPrompt", "result": "PromptResult"}
//! }
//! ```

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use serde_json::{Map, Value};

use crate::Result;
use crate::schema::{SchemaFile, http_route, is_type_name, pointer};

/// A parsed `x-message`.
struct Message<'a> {
    request: bool,
    name: &'a str,
    result: Option<&'a str>,
}

fn parse(value: &Value) -> Option<Message<'_>> {
    let kind = value.get("kind")?.as_str()?;
    let name = value.get("name")?.as_str()?;
    let result = value.get("result").and_then(Value::as_str);
    Some(Message {
        request: kind == "request",
        name,
        result,
    })
}

/// Checks the `x-message` of the definition at `at`, if it has one: a request or a notification
/// with a Rust type name, on a JSON-RPC `x-method`; a request names its result definition, which
/// travels as the same method.
pub(crate) fn validate(file: &SchemaFile, at: &str, obj: &Map<String, Value>) -> Result<()> {
    let Some(value) = obj.get("x-message") else {
        return Ok(());
    };
    let here = pointer(at, "x-message");
    let shape = "`x-message` is {\"kind\": \"request\", \"name\": \"TypeName\", \"result\": \"ResultDefinition\"} or {\"kind\": \"notification\", \"name\": \"TypeName\"}";
    let kind = value.get("kind").and_then(Value::as_str);
    let Some(message) = parse(value).filter(|_| matches!(kind, Some("request" | "notification")))
    else {
        return Err(file.error(&here, shape));
    };
    if !is_type_name(message.name) {
        return Err(file.error(
            &here,
            format!("`{}` is not an UpperCamelCase Rust type name", message.name),
        ));
    }
    let Some(method) = obj.get("x-method").and_then(Value::as_str) else {
        return Err(file.error(
            &here,
            "`x-message` needs an `x-method` on the same definition",
        ));
    };
    if http_route(method).is_some() {
        return Err(file.error(
            &here,
            "`x-message` is for JSON-RPC methods, not HTTP routes",
        ));
    }
    match (message.request, message.result) {
        (true, None) => Err(file.error(
            &here,
            "a request's `x-message` names its `result` definition",
        )),
        (false, Some(_)) => Err(file.error(&here, "a notification has no `result`")),
        (true, Some(result)) => {
            let same = file
                .defs()
                .get(result)
                .and_then(|def| def.get("x-method"))
                .and_then(Value::as_str)
                == Some(method)
                && pointer("/$defs", result) != at;
            if same {
                Ok(())
            } else {
                Err(file.error(
                    &here,
                    format!("`result` must name another definition of this file with `x-method: \"{method}\"`, not `{result}`"),
                ))
            }
        }
        (false, None) => Ok(()),
    }
}

/// The module's `request` and `notification` submodules: one uninhabited type per `x-message`,
/// implementing `cancelkit_protocol::Request` or `::Notification`.
pub(crate) fn markers(file: &SchemaFile) -> TokenStream {
    let mut requests = TokenStream::new();
    let mut notifications = TokenStream::new();
    for def in file.definitions() {
        let (Some(method), Some(message)) = (
            def.method.as_deref(),
            def.schema.get("x-message").and_then(parse),
        ) else {
            continue;
        };
        let marker = format_ident!("{}", message.name);
        let params = format_ident!("{}", def.name);
        match message.result {
            Some(result) => {
                let result = format_ident!("{result}");
                let doc = format!(
                    " `{method}`: a request with [`{}`](super::{}), answered with [`{result}`](super::{result}).",
                    def.name, def.name
                );
                requests.extend(quote! {
                    #[doc = #doc]
                    #[derive(Debug)]
                    pub enum #marker {}
                    impl ::cancelkit_protocol::Request for #marker {
                        const METHOD: &'static str = #method;
                        type Params = super::#params;
                        type Result = super::#result;
                    }
                });
            }
            None => {
                let doc = format!(
                    " `{method}`: a notification with [`{}`](super::{}).",
                    def.name, def.name
                );
                notifications.extend(quote! {
                    #[doc = #doc]
                    #[derive(Debug)]
                    pub enum #marker {}
                    impl ::cancelkit_protocol::Notification for #marker {
                        const METHOD: &'static str = #method;
                        type Params = super::#params;
                    }
                });
            }
        }
    }
    let mut tokens = TokenStream::new();
    if !requests.is_empty() {
        tokens.extend(quote! {
            /// The requests of this module, each tying its method, params and result together.
            pub mod request {
                #requests
            }
        });
    }
    if !notifications.is_empty() {
        tokens.extend(quote! {
            /// The notifications of this module, each tying its method and params together.
            pub mod notification {
                #notifications
            }
        });
    }
    tokens
}
