// fs-test-timeout: 60
/*
** test_code_hash: the generator revision's hash (fs_gen_code_hash) ignores
** comments and the width of whitespace and nothing else, so that an edit to
** comments keeps the shipped winners and an edit to code retires them.
**
**  - C and Lua pairs that differ only in comments or indentation hash alike;
**  - pairs that differ in code hash apart: an identifier, two tokens joined,
**    a newline that ends a preprocessor line, a space before a #define's
**    "(", the text of string and character literals (comment markers and
**    spaces inside them included);
**  - a C block comment counts as one space even across lines, as in C's
**    translation phase 3 (it continues a #define); a line splice counts as
**    nothing, also at the end of a // comment, which it continues;
**  - in Lua, spaces beside brackets, commas and semicolons count for nothing;
**  - Lua's long comments and long strings of any level;
**  - unterminated comments and literals end the text without reading past it;
**  - every embedded file hashes alike with a comment line inserted, has none
**    of what the hash does not parse (CR line ends, NUL bytes, raw strings,
**    digit separators), and the revision's suffix is the hash of them all
**    (an oracle written from gen.c's contract: .lua files as Lua).
** The test can fail: its first run caught a draft that put a space where a
** comment sat beside a bracket ("f(--[[ c ]] 1)" against "f(1)"), and a
** review found that dropping C's spaces beside "(" hid "#define F (x)"
** against "#define F(x)" and that splices were not parsed (cases above).
*/
#include "fs_test.h"

#include "embedded.h"
#include "gen.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H0 1469598103934665603ull

static unsigned long long hc(const char *s) { return fs_gen_code_hash(H0, s, strlen(s), 0); }
static unsigned long long hl(const char *s) { return fs_gen_code_hash(H0, s, strlen(s), 1); }

#define SAME_C(a, b) CHECK_MSG(hc(a) == hc(b), "C should hash alike:\n[%s]\n[%s]", a, b)
#define DIFF_C(a, b) CHECK_MSG(hc(a) != hc(b), "C should hash apart:\n[%s]\n[%s]", a, b)
#define SAME_L(a, b) CHECK_MSG(hl(a) == hl(b), "Lua should hash alike:\n[%s]\n[%s]", a, b)
#define DIFF_L(a, b) CHECK_MSG(hl(a) != hl(b), "Lua should hash apart:\n[%s]\n[%s]", a, b)

static void c_sources(void) {
  /* comments and indentation */
  SAME_C("int a;\nint b;\n", "int a; // one\n/* two\n** three */\n  int b;   \n\n");
  SAME_C("x = 1;", "x = /* inline */ 1;");
  SAME_C("x = 1;", "  x   =   1;  // trailing");
  SAME_C("/* head */\nint f(void);", "/*\n** a longer head\n*/\n\nint f(void);");
  SAME_C("a\n\n\nb", "a\n// gone\nb");
  SAME_C("f( x );", "f( /* the x */ x );");
  /* C keeps every separator: a space before "(" makes a macro object-like */
  DIFF_C("#define F (x)\nF;", "#define F(x)\nF;");
  DIFF_C("#define F() x", "#define F ()x");
  DIFF_C("f(a, b);", "f(a,b);");
  /* line splices: nothing in code, and a // comment runs through them */
  SAME_C("#define A 1 \\\n+ 2\n", "#define A 1 + 2\n");
  SAME_C("#define A 1 \\\r\n+ 2\n", "#define A 1 + 2\n");
  DIFF_C("#define A 1 \\\n+ 2\n", "#define A 1 \\\n\n+ 2\n");
  DIFF_C("// note\n#pragma unroll\nfor (;;);", "// note \\\n#pragma unroll\nfor (;;);");
  SAME_C("// note \\\n#pragma unroll\nfor (;;);", "for (;;);");
  /* code */
  DIFF_C("int a;", "int b;");
  DIFF_C("ab", "a b");
  DIFF_C("y = a - -b;", "y = a --b;");
  DIFF_C("y = a+ +b;", "y = a++b;");
  DIFF_C("y = a/ /**/ /b;", "y = a//b;");
  DIFF_C("x = 1;", "x = 2;");
  DIFF_C("#define A 1\n#define B 2\n", "#define A 1 #define B 2\n");
  DIFF_C("x(); // c\ny();", "x(); y();");
  /* a block comment is one space, newlines in it included */
  SAME_C("#define A 1 /* x\n y */ + 2\n", "#define A 1 /* x y */ + 2\n");
  SAME_C("#define A 1 /* x\n y */ + 2\n", "#define A 1 + 2\n");
  DIFF_C("#define A 1 /* x\n y */ + 2\n", "#define A 1\n+ 2\n");
  /* literals count byte for byte */
  DIFF_C("s = \"a//b\";", "s = \"a\";");
  DIFF_C("s = \"a /* b */ c\";", "s = \"a  c\";");
  DIFF_C("s = \"a  b\";", "s = \"a b\";");
  DIFF_C("s = \"a\\\" // b\";", "s = \"a\\\"\";");
  DIFF_C("c = '/'; d = '*'; x = 1;", "c = '/'; d = '*'; x = 2;");
  DIFF_C("c = '\"'; x = 1; // \"", "c = '\"'; x = 2; // \"");
  /* unterminated: the text ends, nothing past it is read */
  const char u[] = "x /* open";
  CHECK(fs_gen_code_hash(H0, u, 4, 0) == hc("x"));
  CHECK(fs_gen_code_hash(H0, u, sizeof u - 1, 0) == hc("x"));
  CHECK(hc("s = \"open") != hc("s = \"other"));
  CHECK(hc("x /") != hc("x"));
  CHECK(hc("") == H0 && hc("  // only a comment\n") == H0);
}

static void lua_sources(void) {
  SAME_L("local a = 1\nreturn a\n", "-- head\nlocal a = 1 -- one\n\n  return a\n");
  SAME_L("local a = 1\nreturn a", "local a = 1 return a"); /* newlines do not matter */
  SAME_L("f(1)", "f(--[[ long\ncomment ]] 1)");
  SAME_L("f(1)", "f(--[==[ long ]] still ]=] comment ]==] 1)");
  SAME_L("f(a, b)", "f( a ,b )"); /* nothing beside "(){},;" in Lua */
  DIFF_L("f(a b)", "f(ab)");
  DIFF_L("local a = 1", "local a = 2");
  DIFF_L("x = \"a -- b\"", "x = \"a \"");
  DIFF_L("x = 'a -- b'", "x = 'a '");
  DIFF_L("x = [[a -- b]]", "x = [[a ]]");
  DIFF_L("x = [==[a ]] -- b]==]", "x = [==[a ]]]==]");
  DIFF_L("x = \"a  b\"", "x = \"a b\"");
  DIFF_L("a - -b", "a - b");
  /* C's comment markers are code in Lua, and Lua's are code in C */
  CHECK(hl("x = a // b") != hl("x = a"));
  CHECK(hc("x = a -- b") != hc("x = a"));
  CHECK(hl("x --[[ open") == hl("x"));
}

/* Is the embedded file at path Lua (gen.c's rule: the name ends in .lua)? */
static int is_lua(const char *path) {
  const size_t n = strlen(path);
  return n > 4 && !strcmp(path + n - 4, ".lua");
}

/* Every embedded file: a comment line after its first line keeps its hash. */
static void embedded_files(void) {
  int n = 0;
  for (const fs_embedded_file *f = fs_embedded; f->path; f++) {
    const int lua = is_lua(f->path);
    const char *nl = memchr(f->data, '\n', f->size);
    if (!nl) continue;
    const char *ins = lua ? "-- an inserted comment line\n" : "// an inserted comment line\n";
    const size_t head = (size_t)(nl + 1 - f->data), il = strlen(ins);
    char *t = malloc(f->size + il);
    REQUIRE(t);
    memcpy(t, f->data, head);
    memcpy(t + head, ins, il);
    memcpy(t + head + il, f->data + head, f->size - head);
    CHECK_MSG(fs_gen_code_hash(H0, t, f->size + il, lua) ==
                  fs_gen_code_hash(H0, f->data, f->size, lua),
              "%s: an inserted comment line changed the hash", f->path);
    free(t);
    n++;
  }
  CHECK_MSG(n >= 10, "only %d embedded files", n);
  printf("%d embedded files keep their hash with a comment line inserted\n", n);

  /* the revision's suffix: the top 32 bits of FNV-1a over every embedded
  ** file but the bias and filter modules and their penalty header, its
  ** path's bytes then its code */
  unsigned long long h = H0;
  for (const fs_embedded_file *f = fs_embedded; f->path; f++) {
    if (!fs_gen_in_revision(f->path)) continue;
    const size_t pl = strlen(f->path);
    for (size_t i = 0; i < pl; i++) h = (h ^ (unsigned char)f->path[i]) * 1099511628211ull;
    h = fs_gen_code_hash(h, f->data, f->size, is_lua(f->path));
  }
  char want[16];
  snprintf(want, sizeof want, "-%08x", (unsigned)(h >> 32));
  fs_gen *g = NULL;
  char err[256];
  REQUIRE(fs_gen_open(&g, err, sizeof err) == 0);
  const char *rev = fs_gen_revision(g);
  const size_t rl = strlen(rev), wl = strlen(want);
  CHECK_MSG(rl > wl && !strcmp(rev + rl - wl, want), "revision '%s' does not end in '%s'", rev,
            want);
  printf("generator revision %s\n", rev);
  fs_gen_close(g);
}

/* What fs_gen_code_hash does not parse is in no embedded file. */
static void embedded_hygiene(void) {
  for (const fs_embedded_file *f = fs_embedded; f->path; f++) {
    const int lua = is_lua(f->path);
    CHECK_MSG(strlen(f->data) == f->size, "%s: a NUL byte", f->path);
    for (size_t i = 0; i < f->size; i++) {
      const char c = f->data[i], prev = i ? f->data[i - 1] : 0;
      const char next = i + 1 < f->size ? f->data[i + 1] : 0;
      CHECK_MSG(c != '\r', "%s: a CR at byte %zu", f->path, i);
      if (lua) continue;
      CHECK_MSG(!(c == '"' && prev == 'R' && next == '('), "%s: a raw string at byte %zu",
                f->path, i);
      CHECK_MSG(!(c == '\'' && isdigit((unsigned char)prev) && isdigit((unsigned char)next)),
                "%s: a digit separator at byte %zu", f->path, i);
    }
  }
}

int main(void) {
  c_sources();
  lua_sources();
  embedded_files();
  embedded_hygiene();
  return fs_test_done("test_code_hash");
}
