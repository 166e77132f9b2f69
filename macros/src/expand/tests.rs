//! Snapshots of the expansion for each option, and the option parser's edge cases.

use quote::quote;

use super::{expand, parse_duration_ms};

/// The expansion, formatted, as a snapshot-friendly string.
fn pretty(attr: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
    let tokens = expand(attr, item);
    let file: syn::File = syn::parse2(tokens.clone())
        .unwrap_or_else(|e| panic!("expansion does not parse: {e}\n{tokens}"));
    prettyplease::unparse(&file)
}

#[test]
fn abort_mode() {
    insta::assert_snapshot!(pretty(
        quote!(),
        quote! {
            /// Searches.
            pub async fn search(query: String) -> Result<Vec<String>, JsonRpcError> {
                let hits = index.lookup(&query).await?;
                Ok(hits)
            }
        }
    ));
}

#[test]
fn cooperative_mode() {
    insta::assert_snapshot!(pretty(
        quote!(cooperative),
        quote! {
            async fn crawl(&self, urls: Vec<String>) -> Result<Vec<Page>, Error> {
                let mut pages = Vec::new();
                for url in urls {
                    if cancelkit::is_cancelled() { break; }
                    pages.push(fetch(&url).await?);
                }
                Ok(pages)
            }
        }
    ));
}

#[test]
fn cooperative_with_grace_and_timeout() {
    insta::assert_snapshot!(pretty(
        quote!(cooperative, grace = "2s", timeout = "30s"),
        quote! {
            async fn crawl(&self) -> Result<Vec<Page>, Error> {
                let mut pages = Vec::new();
                while !cancelkit::is_cancelled() {
                    pages.push(self.next().await?);
                }
                Ok(pages)
            }
        }
    ));
}

/// A body that is one expression is spliced into the async block, not nested as a block in it:
/// nested, rustc's `unused_braces` flagged the user's braces.
#[test]
fn expression_body_is_not_nested_in_a_block() {
    insta::assert_snapshot!(pretty(
        quote!(),
        quote! {
            async fn run(&self, x: u32) -> Result<u32, JsonRpcError> { Ok(x * 2) }
        }
    ));
}

#[test]
fn inner_attributes_stay_inside_the_body() {
    let text = pretty(
        quote!(),
        quote! {
            async fn f() -> Result<(), E> {
                #![allow(unused_variables)]
                let x = 1;
                Ok(())
            }
        },
    );
    let inner = text.find("#![allow(unused_variables)]").expect(&text);
    assert!(inner > text.find("async fn f").unwrap(), "{text}");
}

#[test]
fn grace_needs_cooperative_and_a_duration() {
    let item = quote! { async fn f() -> Result<(), E> { Ok(()) } };
    for (attr, message) in [
        (quote!(grace = "2s"), "`grace` needs `cooperative`"),
        (
            quote!(timeout = "1s", grace = "2s"),
            "`grace` needs `cooperative`",
        ),
        (quote!(cooperative, grace = "2"), "malformed grace"),
        (quote!(cooperative, grace = 2), "`grace` takes a string"),
        (
            quote!(cooperative, grace = "1s", grace = "2s"),
            "`grace` is given twice",
        ),
    ] {
        let out = expand(attr.clone(), item.clone()).to_string();
        assert!(out.contains(message), "{attr}: {out}");
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
    }
}

#[test]
fn timeout() {
    insta::assert_snapshot!(pretty(
        quote!(timeout = "30s"),
        quote! {
            async fn slow(&mut self) -> anyhow::Result<()> { work().await }
        }
    ));
}

#[test]
fn on_cancel() {
    insta::assert_snapshot!(pretty(
        quote!(on_cancel = cancelled_turn),
        quote! {
            async fn prompt(self: Arc<Self>, req: PromptRequest) -> Result<PromptResult, JsonRpcError> {
                self.run_turn(req).await
            }
        }
    ));
}

#[test]
fn token_parameter() {
    insta::assert_snapshot!(pretty(
        quote!(token = ct),
        quote! {
            async fn tool<T: Into<String>>(&self, input: T, ct: CancellationToken) -> Result<CallToolResult, McpError>
            where T: Send
            {
                self.call(input.into()).await
            }
        }
    ));
}

#[test]
fn crate_override_with_timeout_and_borrowed_token() {
    insta::assert_snapshot!(pretty(
        quote!(crate = "::my_sdk::cancelkit", timeout = "250ms", token = ct),
        quote! {
            async fn handle(ct: &tokio_util::sync::CancellationToken) -> Result<u8, Error> { Ok(1) }
        }
    ));
}

#[test]
fn impl_trait_return_types_skip_the_type_pin() {
    let text = pretty(
        quote!(),
        quote! { async fn f() -> Result<impl Display, Error> { Ok(1) } },
    );
    assert!(!text.contains("__cancelkit_return"), "{text}");
}

#[test]
fn misuse_keeps_the_item_and_adds_one_compile_error() {
    let item = quote! { fn not_async() -> Result<(), E> { Ok(()) } };
    let out = expand(quote!(), item.clone()).to_string();
    assert!(out.starts_with(&item.to_string()), "{out}");
    assert_eq!(out.matches("compile_error").count(), 1, "{out}");
}

#[test]
fn durations() {
    assert_eq!(parse_duration_ms("30s"), Some(30_000));
    assert_eq!(parse_duration_ms("500ms"), Some(500));
    assert_eq!(parse_duration_ms("2m"), Some(120_000));
    assert_eq!(parse_duration_ms(" 1 s "), Some(1_000));
    for bad in [
        "",
        "s",
        "30",
        "30h",
        "1.5s",
        "-1s",
        "30 seconds",
        "99999999999999999999s",
    ] {
        assert_eq!(parse_duration_ms(bad), None, "{bad:?}");
    }
}

/// A body another attribute already turned into `Box::pin(async move { .. })` (rmcp's
/// `#[tool]`, `#[async_trait]`) is wrapped inside, keeping the boxed signature.
#[test]
fn desugared_async_fn() {
    insta::assert_snapshot!(pretty(
        quote!(token = ct),
        quote! {
            fn slow(&self, ct: CancellationToken)
                -> ::std::pin::Pin<Box<dyn ::std::future::Future<Output = Result<CallToolResult, ErrorData>> + Send + '_>>
            {
                Box::pin(async move { self.work().await })
            }
        }
    ));
}
