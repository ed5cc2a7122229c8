//! [`Func`]: the functions an expression may call. All are pure and deterministic; there is
//! deliberately no random function (AG-022).

macro_rules! funcs {
    ($($variant:ident => $name:literal, $min:literal, $max:literal, $doc:literal;)*) => {
        /// A built-in function of `<expr>`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Func {
            $(
                #[doc = $doc]
                $variant,
            )*
        }

        impl Func {
            /// Every function.
            pub const ALL: &'static [Func] = &[$(Func::$variant),*];

            /// Its name in source.
            pub fn name(self) -> &'static str {
                match self { $(Func::$variant => $name,)* }
            }

            /// The least and the most arguments it takes.
            pub fn arity(self) -> (usize, usize) {
                match self { $(Func::$variant => ($min, $max),)* }
            }
        }
    };
}

funcs! {
    Len => "len", 1, 1, "`len(x)`: characters of a string, items of a list, keys of an object.";
    Upper => "upper", 1, 1, "`upper(s)`: upper case.";
    Lower => "lower", 1, 1, "`lower(s)`: lower case.";
    Trim => "trim", 1, 1, "`trim(s)`: without leading and trailing whitespace.";
    Concat => "concat", 1, 16, "`concat(a, …)`: the values written as text, joined.";
    Contains => "contains", 2, 2, "`contains(x, y)`: `y IN x`.";
    StartsWith => "starts_with", 2, 2, "`starts_with(s, p)`.";
    EndsWith => "ends_with", 2, 2, "`ends_with(s, p)`.";
    Split => "split", 2, 2, "`split(s, sep)`: a list of strings.";
    Join => "join", 2, 2, "`join(list, sep)`: the items written as text, joined by `sep`.";
    Append => "append", 2, 2, "`append(list, x)`: a new list with `x` at the end.";
    First => "first", 1, 1, "`first(list)`: the first item (an error on an empty list).";
    Last => "last", 1, 1, "`last(list)`: the last item (an error on an empty list).";
    Range => "range", 1, 2, "`range(n)` is `[0, …, n-1]`; `range(a, b)` is `[a, …, b-1]`.";
    Abs => "abs", 1, 1, "`abs(n)`.";
    Round => "round", 1, 2, "`round(n)`, `round(n, dp)`: banker's rounding to `dp` places.";
    Min => "min", 1, 16, "`min(a, …)`: the least number.";
    Max => "max", 1, 16, "`max(a, …)`: the greatest number.";
    Sqrt => "sqrt", 1, 1, "`sqrt(n)`: exact-decimal square root (an error below zero).";
    Number => "number", 1, 1, "`number(s)`: a string read as a decimal.";
    Text => "text", 1, 1, "`text(x)`: a value written as text (JSON for lists and objects).";
    Keys => "keys", 1, 1, "`keys(obj)`: an object's keys, sorted.";
}

impl Func {
    /// The function called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Func> {
        Func::ALL.iter().copied().find(|f| f.name() == name)
    }
}

mod apply;
mod room;
