//! `config_keys!`: one line per config key makes its field, its default, its entry in
//! [`KEYS`](super::KEYS) (section, name, what it accepts, what it is for) and how it is
//! read and shown, so that no list of keys can fall out of step with another.
//!
//! Each key is written
//!
//! ```text
//! /// What it is for (the field's doc; docs/configuration.md's and guard(8)'s text).
//! name: Type = default, read, show, "what it accepts";
//! name: Type = default, read, show, "what it accepts", unset: Fallback;
//! ```
//!
//! where `read(dotted_key, value)` turns a TOML value into `Type` or names the key and
//! the fix, and `show(&Type)` writes it as `guard config` prints it. `unset:` names the
//! [`Fallback`](super::Fallback) a key takes its value in use from while no fragment sets it.

macro_rules! config_keys {
    (@fallback) => { None };
    (@fallback $fallback:ident) => { Some(Fallback::$fallback) };
    (
        top {
            $(
                $(#[doc = $top_doc:literal])*
                $top:ident: $top_type:ty = $top_default:expr,
                    $top_read:expr, $top_show:expr, $top_accepts:expr
                    $(, unset: $top_fallback:ident)?;
            )*
        }
        $(
            $(#[doc = $section_doc:literal])*
            [$section:ident] $section_type:ident {
                $(
                    $(#[doc = $doc:literal])*
                    $field:ident: $type:ty = $default:expr, $read:expr, $show:expr, $accepts:expr
                        $(, unset: $fallback:ident)?;
                )*
            }
        )*
    ) => {
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Settings {
            $( $(#[doc = $top_doc])* pub $top: $top_type, )*
            $( pub $section: $section_type, )*
            /// Each key a fragment set, as the fragment wrote its value.
            pub as_written: AsWritten,
        }

        $(
            $(#[doc = $section_doc])*
            #[derive(Debug, Clone, PartialEq, Eq)]
            pub struct $section_type {
                $( $(#[doc = $doc])* pub $field: $type, )*
            }
        )*

        impl Default for Settings {
            fn default() -> Self {
                Settings {
                    $( $top: $top_default, )*
                    $( $section: $section_type { $( $field: $default, )* }, )*
                    as_written: AsWritten::default(),
                }
            }
        }

        /// Every accepted key, in the order `guard config` and the docs list them.
        pub static KEYS: &[Key] = &[
            $(
                Key {
                    section: None,
                    name: stringify!($top),
                    dotted: stringify!($top),
                    accepts: $top_accepts,
                    fallback: config_keys!(@fallback $($top_fallback)?),
                    doc: concat!($($top_doc),*),
                    read: |s, key, v| {
                        s.$top = ($top_read)(key, v)?;
                        Ok(())
                    },
                    show: |s| ($top_show)(&s.$top),
                },
            )*
            $($(
                Key {
                    section: Some(stringify!($section)),
                    name: stringify!($field),
                    dotted: concat!(stringify!($section), ".", stringify!($field)),
                    accepts: $accepts,
                    fallback: config_keys!(@fallback $($fallback)?),
                    doc: concat!($($doc),*),
                    read: |s, key, v| {
                        s.$section.$field = ($read)(key, v)?;
                        Ok(())
                    },
                    show: |s| ($show)(&s.$section.$field),
                },
            )*)*
        ];
    };
}
