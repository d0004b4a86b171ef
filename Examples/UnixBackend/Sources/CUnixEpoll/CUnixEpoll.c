// Headers only (include/CUnixEpoll.h); a C target needs one source file.
#include "CUnixEpoll.h"
