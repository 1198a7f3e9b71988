// Parsing of the store URLs that kf::OpenStore accepts (SQLAlchemy's spellings, reference spec §5.6), kept
// apart so that it can be tested without a database.
#pragma once

#include <string>
#include <string_view>

namespace kf::store {

/// What a --db value names.
struct StoreUrl {
  enum class Kind { kSqlite, kPostgres };
  Kind kind = Kind::kSqlite;
  std::string sqlite_path;   ///< kSqlite: the file path
  std::string conninfo;      ///< kPostgres: the URL as libpq takes it (scheme postgresql://, no +driver)
  std::string password;      ///< kPostgres: the password in the URL ("" = none), percent-decoded
  std::string redacted;      ///< the value with any password replaced by "***", for messages
};

/// Parses `url`:
///  * no "scheme://" prefix: a SQLite file path (the value unchanged);
///  * sqlite:///relative/path -> "relative/path"; sqlite:////absolute/path -> "/absolute/path";
///  * postgresql://…, postgres://…, postgresql+driver://…: PostgreSQL (user, password, host, port, database
///    and query are checked for shape here; libpq checks the rest when connecting).
/// Throws kf::Error(kInvalidArgument, field "db") naming the redacted value for an unknown scheme, an empty
/// SQLite path, a value like "sqlite:path" or "postgresql:/x" that starts with a known scheme but lacks
/// "://", or a PostgreSQL URL with a bad port.
StoreUrl ParseStoreUrl(std::string_view url);

/// The value for messages: ParseStoreUrl(url).redacted, or for an unparsable value the value with any
/// "user:password@" part's password replaced by "***". Never throws.
std::string RedactForMessage(std::string_view url);

/// Replaces every occurrence of `secret` in `text` with "***" (for messages from libraries that may quote
/// the connection string). An empty secret changes nothing.
std::string ScrubSecret(std::string text, std::string_view secret);

}  // namespace kf::store
