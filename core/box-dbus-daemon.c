/* box-dbus-daemon.c: to be written */
#include "config.h"
