// Text hygiene for child-process output and task sources: terminal-escape stripping (reference spec §3.1),
// UTF-8 validation and lossy decoding with Python's exact replacement rules, Python-style blank tests.
//
// All functions work on UTF-8 byte strings, run in linear time and never throw.
#pragma once

#include <string>
#include <string_view>

namespace kf {

/// Strips terminal escape sequences like the reference's strip_terminal_escapes (spec §3.1). Text without
/// an ESC byte is returned unchanged. Otherwise, in order:
///  1. OSC-8 hyperlinks `ESC]8;params;URI ST label ESC]8;;ST` (ST = BEL or `ESC\`, all on one line) are
///     rendered as the label when the URI is empty or equals the label, as the URI when the label is blank,
///     else as "label (URI)"; CSI sequences inside the label are removed first.
///  2. DCS/SOS/PM/APC strings (`ESC P|X|^|_` … first ST on the same line) are deleted.
///  3. Other OSC strings (`ESC ]` … first ST on the same line) are deleted.
///  4. CSI sequences (`ESC [`, bytes 0x30–0x3F*, 0x20–0x2F*, final 0x40–0x7E) are deleted.
///  5. Short escapes are deleted: ESC + intermediates (0x20–0x2F, one or more) + final (0x30–0x7E), or
///     ESC + one final byte in 0x30–0x5A / 0x5C–0x7E.
///  6. Remaining ESC bytes are removed; CR, BS, BEL and other C0 controls are kept.
/// The result contains no ESC, so the function is idempotent. Linear time (no backtracking regex).
std::string StripTerminalEscapes(std::string_view text);

/// Decodes bytes as UTF-8, replacing each maximal invalid subpart with U+FFFD exactly like Python's
/// bytes.decode("utf-8", "replace") (surrogates, overlongs and code points > U+10FFFF are invalid).
/// Valid input is returned unchanged.
std::string DecodeUtf8Replace(std::string_view bytes);

/// True iff `bytes` is valid UTF-8 under Python's strict "utf-8" codec.
bool IsValidUtf8(std::string_view bytes);

/// "" for valid UTF-8, else a description in the words of Python's UnicodeDecodeError, e.g.
/// "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte" (position in bytes).
std::string DescribeUtf8Error(std::string_view bytes);

/// True iff every code point of the UTF-8 text is whitespace by Python's str.isspace() (so
/// `not text.strip()` in Python); "" is blank. Invalid UTF-8 bytes count as non-blank.
bool IsPythonBlank(std::string_view text);

}  // namespace kf
