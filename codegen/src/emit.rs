//! The emitters of our own: what typify cannot derive from a schema.
//!
//! They generate data and thin conversions only: method-name constants, method tables, the
//! request id and the error-code table. Behaviour lives in the hand-written runtime.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use serde_json::Value;

use crate::schema::{Definition, SchemaFile, Special, http_route, pointer};
use crate::{Error, Options, Result};

/// The command named in every header, and in `--check` failures.
pub(crate) const COMMAND: &str = "cargo xtask codegen";

/// Items for one definition: a hand-written replacement for typify's type (`x-codegen`) and the
/// method constants of a message definition (`x-method`).
pub(crate) fn definition_items(
    file: &SchemaFile,
    def: &Definition<'_>,
    options: &Options,
) -> Result<TokenStream> {
    let module = format!(
        "{}{}",
        options.crate_name,
        &file.rust_path()["crate".len()..]
    );
    let mut tokens = match def.special {
        Some(Special::RequestId) => request_id(def, &module),
        Some(Special::ErrorCode) => error_code(file, def, &module)?,
        None => TokenStream::new(),
    };
    if let Some(method) = &def.method {
        let ty = format_ident!("{}", def.name);
        let consts = match http_route(method) {
            Some((verb, path)) => quote! {
                /// The HTTP method of the route this body travels on.
                pub const HTTP_METHOD: &'static str = #verb;
                /// The path of the route this body travels on, relative to the server's base URL.
                pub const PATH: &'static str = #path;
            },
            None => quote! {
                /// The JSON-RPC method name this message travels as.
                pub const METHOD: &'static str = #method;
            },
        };
        tokens.extend(quote! {
            impl #ty {
                #consts
            }
        });
    }
    Ok(tokens)
}

/// `PROTOCOL_VERSION`, from the file's `x-protocol-version`.
pub(crate) fn protocol_version(file: &SchemaFile) -> TokenStream {
    match file.protocol_version() {
        Some(version) => quote! {
            /// The protocol revision this module describes, as it travels on the wire.
            pub const PROTOCOL_VERSION: &str = #version;
        },
        None => TokenStream::new(),
    }
}

/// `METHODS` and `CANCEL_METHODS`: the module's message table, sorted and de-duplicated.
pub(crate) fn method_tables(file: &SchemaFile) -> TokenStream {
    let mut all = std::collections::BTreeSet::new();
    let mut cancels = std::collections::BTreeSet::new();
    for def in file.definitions() {
        if let Some(method) = def.method {
            if def.cancels.is_some() {
                cancels.insert(method.clone());
            }
            all.insert(method);
        }
    }
    if all.is_empty() {
        return TokenStream::new();
    }
    let all = all.iter();
    let cancels = cancels.iter();
    quote! {
        /// Every JSON-RPC method (or HTTP route, as `VERB /path`) defined in this module, sorted.
        pub const METHODS: &[&str] = &[#(#all),*];
        /// The methods (or routes) in [`METHODS`] whose message asks the receiver to cancel
        /// something: a request, a session's turn, a task or a tool call.
        pub const CANCEL_METHODS: &[&str] = &[#(#cancels),*];
    }
}

fn doc_of(schema: &Value) -> String {
    schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The request id: an integer or a string, never equal to each other.
fn request_id(def: &Definition<'_>, module: &str) -> TokenStream {
    let ty = format_ident!("{}", def.name);
    let doc = doc_of(def.schema);
    let branch_doc = |kind: &str| {
        def.schema["anyOf"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|b| b["type"] == kind)
            .map(doc_of)
            .unwrap_or_default()
    };
    let (number_doc, string_doc) = (branch_doc("integer"), branch_doc("string"));
    let example = format!(
        "```\n# use {module}::{ty};\nlet id = {ty}::from(7);\nassert_eq!(id.to_string(), \"7\");\nassert_ne!(id, {ty}::from(\"7\"));\nassert_eq!({ty}::from(\"7\").to_string(), r#\"\"7\"\"#);\n```"
    );
    quote! {
        #[doc = #doc]
        ///
        /// Ids order numbers before strings, numbers by value and strings by their bytes; that
        /// order only exists so ids can key ordered maps. `Display` writes the id as JSON, so the
        /// string id `"7"` and the number `7` stay distinguishable in logs.
        ///
        #[doc = #example]
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(untagged, expecting = "a request id: a string or an integer")]
        pub enum #ty {
            #[doc = #number_doc]
            Number(i64),
            #[doc = #string_doc]
            String(::std::string::String),
        }

        impl ::std::fmt::Display for #ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    Self::Number(n) => ::std::fmt::Display::fmt(n, f),
                    Self::String(s) => ::std::fmt::Display::fmt(&::serde_json::Value::from(s.as_str()), f),
                }
            }
        }

        impl ::std::convert::From<i64> for #ty {
            fn from(value: i64) -> Self {
                Self::Number(value)
            }
        }

        impl ::std::convert::From<::std::string::String> for #ty {
            fn from(value: ::std::string::String) -> Self {
                Self::String(value)
            }
        }

        impl ::std::convert::From<&str> for #ty {
            fn from(value: &str) -> Self {
                Self::String(value.to_owned())
            }
        }
    }
}

/// The error-code table: one variant per named code plus `Other(i64)`.
fn error_code(file: &SchemaFile, def: &Definition<'_>, module: &str) -> Result<TokenStream> {
    let ty = format_ident!("{}", def.name);
    let doc = doc_of(def.schema);
    let mut variants = Vec::new();
    let mut fallback = None;
    for (i, branch) in def.schema["anyOf"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = branch["x-name"].as_str().unwrap_or_default();
        let ident = syn::parse_str::<syn::Ident>(name).map_err(|_| Error::Schema {
            file: file.display.clone(),
            pointer: pointer(
                &pointer(&format!("/$defs/{}", def.name), "anyOf"),
                &i.to_string(),
            ),
            message: format!("`{name}` is not a Rust identifier"),
        })?;
        let title = branch["title"].as_str().unwrap_or_default().to_owned();
        let branch_doc = doc_of(branch);
        match branch["enum"].get(0).and_then(Value::as_i64) {
            Some(code) => variants.push((ident, code, title, branch_doc)),
            None => fallback = Some((ident, title, branch_doc)),
        }
    }
    let (other, other_title, other_doc) = fallback.expect("validated: exactly one fallback");

    let decls = variants.iter().map(|(ident, code, title, doc)| {
        let heading = format!("`{code}` {title}: {doc}");
        quote! { #[doc = #heading] #ident, }
    });
    let literal = |code: &i64| proc_macro2::Literal::i64_unsuffixed(*code);
    let to_code = variants.iter().map(|(ident, code, ..)| {
        let code = literal(code);
        quote! { Self::#ident => #code, }
    });
    let from_code = variants.iter().map(|(ident, code, ..)| {
        let code = literal(code);
        quote! { #code => Self::#ident, }
    });
    let messages = variants
        .iter()
        .map(|(ident, _, title, _)| quote! { Self::#ident => #title, });
    let named = variants.iter().map(|(ident, ..)| quote! { Self::#ident });
    let other_heading = format!("{other_title}: {other_doc}");
    let example_code = variants.first().map(|(_, code, ..)| *code).unwrap_or(0);
    let example = format!(
        "```\n# use {module}::{ty};\nlet code = {ty}::from({example_code});\nassert_eq!(code.code(), {example_code});\nassert_eq!({ty}::from(-1), {ty}::{other}(-1));\n```"
    );

    Ok(quote! {
        #[doc = #doc]
        ///
        /// Two codes are equal when their numbers are equal, so `Other(n)` built by hand with a
        /// named number still compares equal to the named variant; build codes with `from`.
        ///
        #[doc = #example]
        #[derive(Clone, Copy, Debug)]
        pub enum #ty {
            #(#decls)*
            #[doc = #other_heading]
            #other(i64),
        }

        impl #ty {
            /// Every named code, in the order of the schema's table.
            pub const NAMED: &'static [Self] = &[#(#named),*];

            /// The numeric code sent on the wire.
            pub const fn code(self) -> i64 {
                match self {
                    #(#to_code)*
                    Self::#other(code) => code,
                }
            }

            /// The standard message for this code (for `Other`, a generic one).
            pub const fn message(self) -> &'static str {
                match self {
                    #(#messages)*
                    Self::#other(_) => #other_title,
                }
            }

            /// The named variant for `code`, or `Other(code)`.
            pub const fn from_code(code: i64) -> Self {
                match code {
                    #(#from_code)*
                    code => Self::#other(code),
                }
            }
        }

        impl ::std::convert::From<i64> for #ty {
            fn from(code: i64) -> Self {
                Self::from_code(code)
            }
        }

        impl ::std::convert::From<#ty> for i64 {
            fn from(code: #ty) -> Self {
                code.code()
            }
        }

        impl ::std::cmp::PartialEq for #ty {
            fn eq(&self, other: &Self) -> bool {
                self.code() == other.code()
            }
        }

        impl ::std::cmp::Eq for #ty {}

        impl ::std::hash::Hash for #ty {
            fn hash<H: ::std::hash::Hasher>(&self, state: &mut H) {
                self.code().hash(state);
            }
        }

        impl ::std::fmt::Display for #ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{} ({})", self.message(), self.code())
            }
        }

        impl ::serde::Serialize for #ty {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {
                serializer.serialize_i64(self.code())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for #ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
                <i64 as ::serde::Deserialize>::deserialize(deserializer).map(Self::from_code)
            }
        }
    })
}

/// Formats a module and puts the `@generated` header on top.
///
/// Before formatting, every enum variant and struct field typify left without documentation gets
/// a doc comment derived from the schema (the literal value it stands for), so the generated crate
/// builds cleanly under `missing_docs`.
pub(crate) fn render(file: &SchemaFile, tokens: TokenStream) -> Result<String> {
    let mut ast: syn::File = syn::parse2(tokens).map_err(|e| Error::Schema {
        file: file.display.clone(),
        pointer: String::new(),
        message: format!("generated code does not parse (a generator bug): {e}"),
    })?;
    document_items(&mut ast.items);
    let module_doc = file.module_doc();
    ast.attrs
        .insert(0, syn::parse_quote!(#![doc = #module_doc]));
    // typify writes `impl Default` by hand for enums with a schema default.
    ast.attrs
        .push(syn::parse_quote!(#![allow(clippy::derivable_impls)]));
    let header = format!(
        "// @generated by {COMMAND} from {} (sha256 {}). Do not edit.\n",
        file.display, file.digest
    );
    Ok(header + &prettyplease::unparse(&ast))
}

fn has_doc(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("doc"))
}

fn push_doc(attrs: &mut Vec<syn::Attribute>, text: &str) {
    let text = format!(" {text}");
    attrs.insert(0, syn::parse_quote!(#[doc = #text]));
}

/// The `rename` of a `#[serde(rename = "...")]` attribute, if any.
fn serde_rename(attrs: &[syn::Attribute]) -> Option<String> {
    let mut rename = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                rename = Some(meta.value()?.parse::<syn::LitStr>()?.value());
            } else if meta.input.peek(syn::Token![=]) {
                meta.value()?.parse::<syn::Expr>()?;
            }
            Ok(())
        });
    }
    rename
}

fn document_items(items: &mut [syn::Item]) {
    for item in items {
        match item {
            syn::Item::Enum(e) => {
                for variant in &mut e.variants {
                    if !has_doc(&variant.attrs) {
                        let value = serde_rename(&variant.attrs)
                            .unwrap_or_else(|| variant.ident.to_string());
                        push_doc(&mut variant.attrs, &format!("The literal `{value:?}`."));
                    }
                }
            }
            syn::Item::Struct(s) => {
                for field in &mut s.fields {
                    if !has_doc(&field.attrs) {
                        let text = match &field.ident {
                            Some(name) if name == "extra" => {
                                "Members the schema does not describe, kept as received so they \
                                 survive a deserialize/serialize round trip."
                            }
                            _ => "The wrapped value.",
                        };
                        push_doc(&mut field.attrs, text);
                    }
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, items)) = &mut m.content {
                    document_items(items);
                }
            }
            _ => {}
        }
    }
}
