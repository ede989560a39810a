/* box-requests.c: to be written */
#include "config.h"
