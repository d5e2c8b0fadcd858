// The public header must compile alone as C++ (-Wpedantic -Werror).
#include "flashsampling.h"
int fs_header_alone_cxx() { return FS_VERSION_NUMBER + (int)sizeof(fs_problem); }
