//! [`Code`]: the error and warning codes of APS 07 (AG-001…AG-046, AG-W01…AG-W03), plus the
//! engine's own codes for text that is not in the grammar at all (AP-001) and for a limit of
//! the engine a document or a run went past (AP-002).

use std::fmt;

/// How bad a diagnostic is: 07 says hard errors are fatal, warnings are surfaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Fatal for the current compile or run.
    Error,
    /// Surfaced to the caller; the process may still run.
    Warning,
}

impl Severity {
    /// `"error"` or `"warning"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

macro_rules! codes {
    ($($variant:ident => $code:literal, $name:literal;)*) => {
        /// A code of the APS error taxonomy (07), or one of the engine's own
        /// ([`Code::Syntax`], [`Code::LimitExceeded`]).
        ///
        /// Every code of 07 is listed, including those the front end never raises (they belong
        /// to the engine or to prompt formatting); `src/process/check.rs` says which is which.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code {
            $(
                #[doc = concat!("`", $code, "` ", $name, ".")]
                $variant,
            )*
        }

        impl Code {
            /// Every code, in the order of 07 (then the engine's own).
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The code as written in 07 (`"AG-004"`).
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }

            /// The code's name in 07 (`"ProcessIdMismatch"`).
            pub fn name(self) -> &'static str {
                match self { $(Code::$variant => $name,)* }
            }
        }
    };
}

codes! {
    UndefinedSymbol => "AG-001", "UndefinedSymbol";
    ReservedTokenMisuse => "AG-002", "ReservedTokenMisuse";
    InvalidId => "AG-003", "InvalidId";
    ProcessIdMismatch => "AG-004", "ProcessIdMismatch";
    UnresolvedPlaceholder => "AG-006", "UnresolvedPlaceholder";
    BadJson => "AG-007", "BadJSON";
    CaptureMissing => "AG-008", "CaptureMissing";
    TagMismatch => "AG-009", "TagMismatch";
    CommentDetected => "AG-010", "CommentDetected";
    TabDetected => "AG-011", "TabDetected";
    KeyOrder => "AG-012", "KeyOrder";
    DuplicateSymbol => "AG-013", "DuplicateSymbol";
    TimeFormat => "AG-014", "TimeFormat";
    CasePolicy => "AG-015", "CasePolicy";
    ProcessNameAttrMismatch => "AG-016", "ProcessNameAttrMismatch";
    ToolPolicy => "AG-017", "ToolPolicy";
    ConcurrencyPolicy => "AG-018", "ConcurrencyPolicy";
    ForbiddenSymbolOrigin => "AG-019", "ForbiddenSymbolOrigin";
    SteValidationFailed => "AG-021", "STEValidationFailed";
    RandomnessPolicy => "AG-022", "RandomnessPolicy";
    WithScopeError => "AG-023", "WithScopeError";
    AliasMapError => "AG-024", "AliasMapError";
    TimeoutRetryPolicy => "AG-027", "TimeoutRetryPolicy";
    CapturePathError => "AG-028", "CapturePathError";
    AssertInvalid => "AG-029", "AssertInvalid";
    SemicolonDetected => "AG-030", "SemicolonDetected";
    PaddingWhitespace => "AG-031", "PaddingWhitespace";
    SensitiveInLog => "AG-032", "SensitiveInLog";
    InstructionsLinePolicy => "AG-033", "InstructionsLinePolicy";
    PredefinedToolCollision => "AG-034", "PredefinedToolCollision";
    InPromptConfigOrImports => "AG-035", "InPromptConfigOrImports";
    FormatContractViolation => "AG-036", "FormatContractViolation";
    DictReferenceForbidden => "AG-037", "DictReferenceForbidden";
    DictInConfigForbidden => "AG-038", "DictInConfigForbidden";
    FormatUndefined => "AG-039", "FormatUndefined";
    FormatFenceError => "AG-040", "FormatFenceError";
    FormatWhereMissing => "AG-041", "FormatWhereMissing";
    PlaceholderMismatch => "AG-042", "PlaceholderMismatch";
    PlaceholderStyleError => "AG-043", "PlaceholderStyleError";
    ProcessArgsMismatch => "AG-044", "ProcessArgsMismatch";
    BlockConstantUnterminated => "AG-045", "BlockConstantUnterminated";
    BlockConstantTypeUnknown => "AG-046", "BlockConstantTypeUnknown";
    SymbolNotUsed => "AG-W01", "SymbolNotUsed";
    LaxTime => "AG-W02", "LaxTime";
    HeuristicInference => "AG-W03", "HeuristicInference";
    Syntax => "AP-001", "SyntaxError";
    LimitExceeded => "AP-002", "LimitExceeded";
}

impl Code {
    /// Warnings are the `AG-Wnn` codes; everything else is a hard error.
    pub fn severity(self) -> Severity {
        match self {
            Code::SymbolNotUsed | Code::LaxTime | Code::HeuristicInference => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// The code named by `text` (`"AG-004"`), if it is one.
    pub fn parse(text: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == text)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.as_str(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_of_07_is_listed_once_with_its_severity() {
        assert_eq!(Code::ALL.len(), 47);
        for c in Code::ALL {
            assert_eq!(Code::parse(c.as_str()), Some(*c));
            let warning = c.as_str().starts_with("AG-W");
            assert_eq!(c.severity() == Severity::Warning, warning, "{c}");
        }
        assert_eq!(
            Code::ProcessIdMismatch.to_string(),
            "AG-004 ProcessIdMismatch"
        );
    }
}
