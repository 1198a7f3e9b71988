// The web page of kf serve, embedded at build time (CMakeLists.txt, kf_embed_files): exactly the bytes of
// src/serve/assets/*.
#pragma once

#include <string_view>

namespace kf::serve {

extern const std::string_view kIndexHtml;  ///< assets/index.html
extern const std::string_view kAppJs;      ///< assets/app.js
extern const std::string_view kAppCss;     ///< assets/app.css

}  // namespace kf::serve
