// Heavy ATen/c10 headers shared by every core file: precompiled once.
#pragma once
#include <ATen/core/ivalue.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <c10/core/ScalarType.h>
#include <memory>
#include <string>
#include <vector>
