//! The wire format against inputs that once slipped through or crashed: each case is refused
//! with a precise error, or accepted exactly.

use agentpump::envelope::ENVELOPE_NS;
use agentpump::extract::{ExtractError, extract};
use agentpump::{EnvelopeError, Incoming, Limits, Payload, QName};

fn parse(text: &str) -> Result<Payload, EnvelopeError> {
    Payload::parse(text, &Limits::default())
}

#[test]
fn hostile_payloads_are_refused_with_a_precise_error() {
    let cases = [
        // Multi-byte text after the element used to panic while naming what follows.
        (
            "<a xmlns='urn:x'/>é",
            "text outside the payload element at line 1, column 19",
        ),
        ("<a xmlns='urn:x'/><ü/>", "second payload element <ü>"),
        // A namespace URI with a reference: quick-xml binds the raw value, other readers the
        // expanded one, so the pump would route it differently from everyone else.
        (
            r#"<huh xmlns="urn:agentpump:system&#58;v1"/>"#,
            "must be written literally",
        ),
        // Character references to characters XML forbids.
        (
            "<a xmlns='urn:x'>&#1;</a>",
            "invalid character reference `&#1;`",
        ),
        ("<a xmlns='urn:x' b='&#x1B;'/>", "refers to U+001B"),
        // `<` inside an attribute value is not well-formed.
        (
            "<a xmlns='urn:x' b='<'/>",
            "`<` in the value of attribute `b`",
        ),
    ];
    for (text, words) in cases {
        let err = parse(text).unwrap_err().to_string();
        assert!(
            err.contains(words),
            "{text:?}: {err:?} should contain {words:?}"
        );
    }
}

#[test]
fn a_payload_that_carries_a_pump_element_is_marked() {
    let plain = parse("<x xmlns='urn:t'><y/></x>").unwrap();
    assert!(!plain.carries_reserved_element());
    let smuggler =
        parse("<x xmlns='urn:t'><s:halt xmlns:s='urn:agentpump:system:v1'/></x>").unwrap();
    assert!(smuggler.carries_reserved_element());
}

#[test]
fn extraction_refuses_forbidden_characters() {
    let err = extract("see <a xmlns='urn:a'>\u{1}</a>", &Limits::default()).unwrap_err();
    assert!(err.to_string().contains("U+0001"), "{err}");
}

#[test]
fn clark_notation_round_trips_namespaces_with_braces() {
    let q = QName::new("urn:a}b", "x");
    assert_eq!(q.to_string().parse::<QName>().unwrap(), q);
}

#[test]
fn envelope_meta_and_attributes_are_checked() {
    let twice = format!(
        "<message xmlns='{ENVELOPE_NS}'><meta><to>a</to><to>b</to></meta><x xmlns='urn:x'/></message>"
    );
    let err = Incoming::parse(twice.as_bytes(), &Limits::default()).unwrap_err();
    assert!(err.to_string().contains("a second to"), "{err}");
    let attrs: String = (0..70).map(|i| format!(" a{i}='1'")).collect();
    let wide = format!("<message xmlns='{ENVELOPE_NS}'{attrs}><meta/><x xmlns='urn:x'/></message>");
    let err = Incoming::parse(wide.as_bytes(), &Limits::default()).unwrap_err();
    assert!(
        matches!(err, EnvelopeError::TooManyAttributes { .. }),
        "{err}"
    );
}

/// Found by fuzzing: `<to>&#1;</to>` was accepted, and the envelope written back carried a raw
/// U+0001 that no parser (ours included) reads. Meta fields now allow the references payloads do.
#[test]
fn meta_fields_refuse_references_to_forbidden_characters() {
    for meta in ["<to>&#1;</to>", "<thread>&#x1B;</thread>", "<to>&#0;</to>"] {
        let xml = format!(
            "<message xmlns='{ENVELOPE_NS}'><meta>{meta}</meta><x xmlns='urn:x'/></message>"
        );
        let err = Incoming::parse(xml.as_bytes(), &Limits::default()).unwrap_err();
        assert!(
            err.to_string().contains("invalid character reference"),
            "{meta}: {err}"
        );
    }
    let xml = format!(
        "<message xmlns='{ENVELOPE_NS}'><meta><to>a&amp;&#x42;</to></meta><x xmlns='urn:x'/></message>"
    );
    let msg = Incoming::parse(xml.as_bytes(), &Limits::default()).unwrap();
    assert_eq!(msg.to(), Some("a&B"));
}

/// Found by fuzzing: Ask-Loop text-form controls were not counted against `max_outputs`, so an
/// output of 65 of them extracted 65 payloads.
#[test]
fn extraction_counts_ask_loop_controls_against_max_outputs() {
    let control = r#"<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:LOOP:{"control":"continue"}>>>"#;
    let limits = Limits::default();
    assert_eq!(extract(&control.repeat(64), &limits).unwrap().len(), 64);
    let err = extract(&control.repeat(65), &limits).unwrap_err();
    assert_eq!(err, ExtractError::TooMany { limit: 64 });
    let mixed = format!("{}{control}", "<a xmlns='urn:a'/>".repeat(64));
    assert_eq!(
        extract(&mixed, &limits).unwrap_err(),
        ExtractError::TooMany { limit: 64 }
    );
}

#[test]
fn a_leading_xml_declaration_is_read_on_payloads_and_envelopes() {
    let payload = "<a xmlns='urn:x'>1</a>";
    let envelope = format!("<message xmlns='{ENVELOPE_NS}'><meta/>{payload}</message>");
    // (prolog, accepted, or the words of the refusal)
    let cases: [(&str, Result<(), &str>); 9] = [
        (r#"<?xml version="1.0" encoding="UTF-8"?>"#, Ok(())),
        (
            "<?xml version='1.0' encoding='utf-8' standalone='yes'?>\n",
            Ok(()),
        ),
        (
            "<?xml version=\"1.0\"?>\r\n<!-- written by lxml -->\n",
            Ok(()),
        ),
        ("\n  <?xml version=\"1.0\"?><!--a--><!--b-->", Ok(())),
        (
            r#"<?xml version="1.0" encoding="ISO-8859-1"?>"#,
            Err("encoding `ISO-8859-1`: only UTF-8 is accepted"),
        ),
        (
            r#"<?xml version="1.0" encoding="UTF-16"?>"#,
            Err("encoding `UTF-16`: only UTF-8 is accepted"),
        ),
        (
            r#"<?xml version="1.0"?><?xml version="1.0"?>"#,
            Err("XML declaration"),
        ),
        (
            r#"<?xml version="1.0""#,
            Err("malformed XML at line 1, column 1"),
        ),
        (
            "<!-- never closed",
            Err("malformed XML at line 1, column 1"),
        ),
    ];
    for (prolog, expected) in cases {
        let bare = parse(&format!("{prolog}{payload}"));
        match expected {
            Ok(()) => assert_eq!(bare.unwrap().as_str(), payload, "{prolog:?}"),
            Err(words) => {
                let err = bare.unwrap_err().to_string();
                assert!(err.contains(words), "{prolog:?}: {err}");
            }
        }
    }
    // An envelope: the same declarations, the same refusals.
    for (prolog, expected) in &cases[..6] {
        let parsed = Incoming::parse(format!("{prolog}{envelope}").as_bytes(), &Limits::default());
        match expected {
            Ok(()) => assert_eq!(parsed.unwrap().payload().as_str(), payload, "{prolog:?}"),
            Err(words) => {
                let err = parsed.unwrap_err().to_string();
                assert!(err.contains(words), "{prolog:?}: {err}");
            }
        }
    }
}
