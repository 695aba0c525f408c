//! kube-dns-migrate: reads a CoreDNS Corefile, raw or in the `coredns`
//! ConfigMap ([`input`]), parses it ([`corefile`]), translates it into
//! skydns and kube2sky args, kube-dns's ConfigMap and the `/skydns/config`
//! key, with what cannot be carried over ([`translate`]), and renders
//! that as text or JSON ([`output`]). Pure: the binary does the I/O.

pub mod corefile;
pub mod input;
pub mod output;
pub mod translate;

use corefile::Files;
pub use translate::Translation;

/// Input that cannot be translated at all (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Input(#[from] input::InputError),
    #[error(transparent)]
    Parse(#[from] corefile::ParseError),
}

/// Reads `text` (named `label`), parses and translates it. A raw
/// Corefile's imports come from `files`; a ConfigMap's from its data keys.
pub fn check(
    label: &str,
    text: &str,
    files: &dyn Files,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Translation, Error> {
    let (main, corefile) = match input::read(label, text)? {
        input::Input::Raw(source) => (source.label.clone(), corefile::parse(&source, files, env)?),
        input::Input::ConfigMap { corefile, files } => (
            corefile.label.clone(),
            corefile::parse(&corefile, &files, env)?,
        ),
    };
    if corefile.blocks.is_empty() {
        let message = "no server block: nothing to check (an empty input?)";
        return Err(corefile::ParseError::new(&main, 1, message).into());
    }
    Ok(translate::translate(&corefile))
}

/// 0 when everything was carried over, 1 when something was left out.
pub fn exit_code(t: &Translation) -> u8 {
    u8::from(!t.left_out.is_empty())
}
