# Turns the market web page's files into a C source file, so the daemon
# serves them from its own binary (no files to install, nothing external).
# Usage: cmake -DOUT=web_assets.c -DDIR=<daemon/web> -P embed.cmake
set(files index.html app.js style.css openapi.json)
# (a ';' would split a CMake list item, so the charset is added below)
set(types text/html text/javascript text/css application/json)
set(body "/* Generated from daemon/web by embed.cmake; do not edit. */\n#include \"web_assets.h\"\n\n")
set(table "static const hg_web_asset_t assets[] = {\n")
set(i 0)
foreach(f IN LISTS files)
  list(GET types ${i} type)
  file(READ "${DIR}/${f}" hex HEX)
  string(LENGTH "${hex}" hexlen)
  math(EXPR len "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
  string(APPEND body "static const unsigned char asset${i}[${len}] = {\n${bytes}};\n")
  string(APPEND table "    {\"/${f}\", \"${type}; charset=utf-8\", asset${i}, ${len}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND table "};\n")
string(APPEND body "${table}
const hg_web_asset_t *hg_web_asset_find(const char *path) {
  if (path[0] == '/' && path[1] == 0) path = \"/index.html\";
  for (unsigned k = 0; k < sizeof assets / sizeof assets[0]; k++) {
    const char *a = assets[k].path, *b = path;
    while (*a != 0 && *a == *b) a++, b++;
    if (*a == 0 && *b == 0) return &assets[k];
  }
  return 0;
}
")
file(WRITE "${OUT}" "${body}")
