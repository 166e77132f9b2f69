//! The expansion of `#[cancellable]`, as a pure function from tokens to tokens.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Pat, ReturnType, Type};

/// Expands `#[cancellable(attr)] item`. On misuse, returns `item` unchanged followed by a
/// `compile_error!` spanned on the offending tokens.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let result = syn::parse2::<ItemFn>(item.clone())
        .map_err(|e| {
            syn::Error::new(
                e.span(),
                format!("#[cancellable] goes on an `async fn` with a body: {e}"),
            )
        })
        .and_then(|func| {
            let options = Options::parse(attr)?;
            generate(options, func)
        });
    match result {
        Ok(tokens) => tokens,
        Err(error) => {
            let mut tokens = item;
            tokens.extend(error.to_compile_error());
            tokens
        }
    }
}

/// The parsed attribute arguments.
#[derive(Default)]
struct Options {
    cooperative: Option<Span>,
    timeout_ms: Option<u64>,
    grace_ms: Option<(Span, u64)>,
    on_cancel: Option<(Span, syn::ExprPath)>,
    token: Option<syn::Ident>,
    krate: Option<syn::Path>,
}

const KNOWN: &str = "`cooperative`, `grace = \"2s\"`, `timeout = \"30s\"`, `on_cancel = path`, `token = param`, `crate = \"path\"`";

impl Options {
    fn parse(attr: TokenStream) -> syn::Result<Self> {
        let mut options = Options::default();
        let parser = syn::meta::parser(|meta| {
            let name = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_else(|| meta.path.to_token_stream().to_string());
            let duplicate = || meta.error(format!("`{name}` is given twice"));
            match name.as_str() {
                "cooperative" => {
                    if options.cooperative.is_some() {
                        return Err(duplicate());
                    }
                    options.cooperative = Some(meta.path.span());
                }
                "timeout" => {
                    if options.timeout_ms.is_some() {
                        return Err(duplicate());
                    }
                    options.timeout_ms = Some(duration_value(&meta, "timeout", "30s")?);
                }
                "grace" => {
                    if options.grace_ms.is_some() {
                        return Err(duplicate());
                    }
                    let span = meta.path.span();
                    options.grace_ms = Some((span, duration_value(&meta, "grace", "2s")?));
                }
                "on_cancel" => {
                    if options.on_cancel.is_some() {
                        return Err(duplicate());
                    }
                    let span = meta.path.span();
                    let expr: syn::Expr = meta.value()?.parse()?;
                    match expr {
                        syn::Expr::Path(path) => options.on_cancel = Some((span, path)),
                        other => {
                            return Err(syn::Error::new(
                                other.span(),
                                "`on_cancel` takes the path of a function to call, such as `on_cancel = cancelled_turn`",
                            ));
                        }
                    }
                }
                "token" => {
                    if options.token.is_some() {
                        return Err(duplicate());
                    }
                    options.token = Some(meta.value()?.parse().map_err(|e| {
                        syn::Error::new(e.span(), "`token` takes the name of a `CancellationToken` parameter, such as `token = ct`")
                    })?);
                }
                "crate" => {
                    if options.krate.is_some() {
                        return Err(duplicate());
                    }
                    let lit: syn::LitStr = meta.value()?.parse()?;
                    options.krate = Some(lit.parse().map_err(|_| {
                        syn::Error::new(
                            lit.span(),
                            format!(
                                "`crate` takes a path such as \"::cancelkit\", not {:?}",
                                lit.value()
                            ),
                        )
                    })?);
                }
                _ => {
                    return Err(meta.error(format!(
                        "unknown option `{name}`; #[cancellable] accepts {KNOWN}"
                    )));
                }
            }
            Ok(())
        });
        syn::parse::Parser::parse2(parser, attr)?;
        if let (None, Some((span, _))) = (options.cooperative, options.grace_ms) {
            return Err(syn::Error::new(
                span,
                "`grace` needs `cooperative`: write `#[cancellable(cooperative, grace = \"2s\")]`; without `cooperative` the body is dropped as soon as it is cancelled, so there is nothing to wait for",
            ));
        }
        if let (Some(_), Some((span, _))) = (options.cooperative, &options.on_cancel) {
            return Err(syn::Error::new(
                *span,
                "`on_cancel` cannot be combined with `cooperative`: a cooperative body decides itself what to return when cancelled",
            ));
        }
        Ok(options)
    }
}

/// The value of `name = "30s"` in milliseconds, with errors that name the option.
fn duration_value(
    meta: &syn::meta::ParseNestedMeta<'_>,
    name: &str,
    example: &str,
) -> syn::Result<u64> {
    let lit: syn::LitStr = meta.value()?.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("`{name}` takes a string such as \"{example}\", \"500ms\" or \"2m\""),
        )
    })?;
    parse_duration_ms(&lit.value()).ok_or_else(|| {
        syn::Error::new(
            lit.span(),
            format!(
                "malformed {name} {:?}: write a whole number followed by `ms`, `s` or `m`, such as \"{example}\"",
                lit.value()
            ),
        )
    })
}

/// `"30s"` → 30 000; units `ms`, `s`, `m`.
fn parse_duration_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let factor = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        _ => return None,
    };
    number.checked_mul(factor)
}

fn generate(options: Options, func: ItemFn) -> syn::Result<TokenStream> {
    let sig = &func.sig;
    if let Some(constness) = &sig.constness {
        return Err(syn::Error::new(
            constness.span(),
            "#[cancellable] cannot be used on a `const fn`: only `async fn`s can be cancelled",
        ));
    }
    // An `async fn` that another attribute already desugared (rmcp's `#[tool]`, `#[async_trait]`)
    // into `fn .. -> Pin<Box<dyn Future<Output = T> ..>> { Box::pin(async move { .. }) }` is
    // handled as the `async fn` it was.
    let desugared = if sig.asyncness.is_none() {
        match desugared_async(&func) {
            Some(desugared) => Some(desugared),
            None => {
                return Err(syn::Error::new(
                    sig.fn_token.span(),
                    "#[cancellable] needs an `async fn`: only code that awaits can be cancelled",
                ));
            }
        }
    } else {
        None
    };
    let return_type: &Type = match (&desugared, &sig.output) {
        (Some((_, output)), _) => output,
        (None, ReturnType::Type(_, ty)) => ty,
        (None, ReturnType::Default) => {
            return Err(syn::Error::new(
                sig.ident.span(),
                "#[cancellable] needs a return type `Result<T, E>` with `E: From<cancelkit::Cancelled>`; this function returns `()`",
            ));
        }
    };
    if !is_result(return_type) {
        return Err(syn::Error::new(
            return_type.span(),
            "#[cancellable] needs a return type `Result<T, E>` with `E: From<cancelkit::Cancelled>`, so cancellation can be returned as an error",
        ));
    }

    let krate = options
        .krate
        .as_ref()
        .map(ToTokens::to_token_stream)
        .unwrap_or_else(|| quote!(::cancelkit));
    let timeout = options
        .timeout_ms
        .map(|ms| quote!(::core::time::Duration::from_millis(#ms)));
    let entered = match (&options.token, timeout) {
        (None, None) => {
            quote!(#krate::__private::no_timeout(#krate::__private::Scope::child_of_current()))
        }
        (None, Some(after)) => quote!(#krate::__private::timeout(
            #krate::__private::Scope::child_of_current(),
            #after
        )),
        (Some(name), timeout) => {
            let ty = token_parameter(sig, name)?;
            let borrow = if matches!(ty, Type::Reference(_)) {
                quote!()
            } else {
                quote!(&)
            };
            match timeout {
                None => quote!(#krate::__private::parent(#borrow #name)),
                Some(after) => {
                    quote!(#krate::__private::parent_with_timeout(#borrow #name, #after))
                }
            }
        }
    };

    // Pin the async block's output to the declared return type, so `?` and `return` inside the
    // body infer exactly as they do in the original function (the trick tracing's #[instrument]
    // uses). Skipped when the return type has `impl Trait`, which cannot name a local's type.
    let fake_return = (!mentions_impl_trait(return_type)).then(|| {
        quote! {
            #[allow(unreachable_code, clippy::diverging_sub_expression, clippy::needless_return)]
            if false {
                let __cancelkit_return: #return_type = loop {};
                return __cancelkit_return;
            }
        }
    });
    // The body's statements go straight into the async block. Wrapping the whole block
    // (`async move { .. { Ok(x) } }`) would make rustc lint the user's own braces as
    // `unused_braces` when the body is a single expression on one line, with a suggestion
    // (remove the function's braces) that does not compile.
    let stmts = match &desugared {
        Some((inner, _)) => &inner.block.stmts,
        None => &func.block.stmts,
    };
    let body = quote!(async move { #fake_return #(#stmts)* });

    // Spanned on the return type: if `E: From<Cancelled>` is missing, the error points there.
    let span = return_type.span();
    let call = if let Some((_, grace_ms)) = options.grace_ms {
        let grace = quote!(::core::time::Duration::from_millis(#grace_ms));
        quote_spanned!(span=> #krate::__private::graceful(#entered, #grace, #body).await)
    } else if options.cooperative.is_some() {
        quote!(#krate::__private::cooperative(#entered, #body).await)
    } else {
        let on_cancel = match &options.on_cancel {
            Some((_, path)) => quote!(#krate::__private::ReturnValue(#path)),
            None => quote!(#krate::__private::ReturnError),
        };
        quote_spanned!(span=> #krate::__private::abortable(#entered, #on_cancel, #body).await)
    };

    let ItemFn {
        attrs, vis, sig, ..
    } = &func;
    // Inner attributes (`#![allow(..)]` at the top of the body) stay inside the body.
    let (inner_attrs, outer_attrs): (Vec<_>, Vec<_>) = attrs
        .iter()
        .partition(|attr| matches!(attr.style, syn::AttrStyle::Inner(_)));
    let call = match &desugared {
        Some(_) => quote!(::std::boxed::Box::pin(async move { #call })),
        None => call,
    };
    Ok(quote! {
        #(#outer_attrs)*
        #vis #sig {
            #(#inner_attrs)*
            #call
        }
    })
}

/// Recognises `fn .. -> Pin<Box<dyn Future<Output = T> ..>> { Box::pin(async move { .. }) }`:
/// returns the inner async block and `T`.
fn desugared_async(func: &ItemFn) -> Option<(&syn::ExprAsync, &Type)> {
    let [syn::Stmt::Expr(syn::Expr::Call(call), None)] = func.block.stmts.as_slice() else {
        return None;
    };
    let syn::Expr::Path(callee) = &*call.func else {
        return None;
    };
    let segments: Vec<String> = callee
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if !segments.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
        return None;
    }
    let syn::Expr::Async(inner) = &call.args[0] else {
        return None;
    };
    inner.capture.as_ref()?;
    let ReturnType::Type(_, ty) = &func.sig.output else {
        return None;
    };
    Some((inner, future_output(ty)?))
}

/// `T` in `Pin<Box<dyn Future<Output = T> + ..>>` (paths may be qualified).
fn future_output(ty: &Type) -> Option<&Type> {
    fn last_generic<'a>(ty: &'a Type, name: &str) -> Option<&'a syn::PathArguments> {
        let Type::Path(path) = ty else { return None };
        let last = path.path.segments.last()?;
        (last.ident == name).then_some(&last.arguments)
    }
    fn single_type(args: &syn::PathArguments) -> Option<&Type> {
        let syn::PathArguments::AngleBracketed(args) = args else {
            return None;
        };
        args.args.iter().find_map(|arg| match arg {
            syn::GenericArgument::Type(ty) => Some(ty),
            _ => None,
        })
    }
    let boxed = single_type(last_generic(ty, "Pin")?)?;
    let Type::TraitObject(object) = single_type(last_generic(boxed, "Box")?)? else {
        return None;
    };
    object.bounds.iter().find_map(|bound| {
        let syn::TypeParamBound::Trait(bound) = bound else {
            return None;
        };
        let last = bound.path.segments.last()?;
        if last.ident != "Future" {
            return None;
        }
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        args.args.iter().find_map(|arg| match arg {
            syn::GenericArgument::AssocType(assoc) if assoc.ident == "Output" => Some(&assoc.ty),
            _ => None,
        })
    })
}

/// Whether `ty` is spelled `Result<..>` (any path ending in `Result`, such as `io::Result<T>`).
fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "Result"),
        Type::Group(group) => is_result(&group.elem),
        Type::Paren(paren) => is_result(&paren.elem),
        _ => false,
    }
}

fn mentions_impl_trait(ty: &Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|tt| match tt {
            proc_macro2::TokenTree::Ident(ident) => ident == "impl",
            proc_macro2::TokenTree::Group(group) => walk(group.stream()),
            _ => false,
        })
    }
    walk(ty.to_token_stream())
}

/// The type of the parameter named by `token = name`, which must be a `CancellationToken` or the
/// ACP SDK's `RequestCancellation` (owned or borrowed).
fn token_parameter<'a>(sig: &'a syn::Signature, name: &syn::Ident) -> syn::Result<&'a Type> {
    let param = sig.inputs.iter().find_map(|arg| match arg {
        FnArg::Typed(typed) => match &*typed.pat {
            Pat::Ident(ident) if ident.ident == *name => Some(&*typed.ty),
            _ => None,
        },
        FnArg::Receiver(_) => None,
    });
    let ty = param.ok_or_else(|| {
        syn::Error::new(
            name.span(),
            format!("`token = {name}` names no parameter of this function"),
        )
    })?;
    let inner = match ty {
        Type::Reference(reference) => &*reference.elem,
        other => other,
    };
    let is_token = matches!(inner, Type::Path(path) if path.path.segments.last().is_some_and(|s| s.ident == "CancellationToken" || s.ident == "RequestCancellation"));
    if is_token {
        Ok(ty)
    } else {
        Err(syn::Error::new(
            ty.span(),
            format!(
                "`token = {name}` must name a `CancellationToken` parameter (or the ACP SDK's `RequestCancellation`, feature `acp`), owned or borrowed"
            ),
        ))
    }
}

#[cfg(test)]
mod tests;
