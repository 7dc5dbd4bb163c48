/// An enum over a `u8` where every value not named is `Unknown(value)`, so
/// parsing a reserved or future value never fails (smoltcp's `enum_with_unknown!`).
macro_rules! enum_with_unknown {
    (
        $(#[$enum_attr:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$variant_attr:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy, Hash)]
        $(#[$enum_attr])*
        pub enum $name {
            $( $(#[$variant_attr])* $variant ),*,
            /// A value with no name in the specification.
            Unknown($ty),
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant ),*,
                    other => $name::Unknown(other),
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value ),*,
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

/// A fixed-size extension header: the view type with `new_checked`, `check_len`,
/// `into_inner` and the header length. Each header module adds its accessors.
macro_rules! fixed_header {
    ($(#[$attr:meta])* $name:ident, $len:expr) => {
        $(#[$attr])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// The length of this header on the wire.
            pub const LEN: usize = $len;

            /// Wraps a buffer without checking it; accessors may panic on a short one.
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }

            /// Wraps a buffer after checking it is long enough for every accessor.
            pub fn new_checked(buffer: T) -> $crate::wire::Result<Self> {
                let h = Self::new_unchecked(buffer);
                h.check_len()?;
                Ok(h)
            }

            /// `Err(Truncated)` if the buffer is shorter than the header.
            pub fn check_len(&self) -> $crate::wire::Result<()> {
                if self.buffer.as_ref().len() < Self::LEN {
                    Err($crate::wire::Error::Truncated)
                } else {
                    Ok(())
                }
            }

            /// Gives the buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
