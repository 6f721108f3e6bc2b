//===- DeviceCalibration.h - One GPU's figures for the predictor -*- C++ -*-===//
///
/// \file
/// coll-calibrate --ranks-as gpu: what the predictor's model needs of one
/// GPU that runs every rank of a plan (DeviceWorld, the one-device mode),
/// measured through the runtime itself.
///
//===----------------------------------------------------------------------===//

#ifndef COLL_TOOLS_DEVICECALIBRATION_H
#define COLL_TOOLS_DEVICECALIBRATION_H

#include "coll/Runtime/Status.h"

#include <string>

namespace coll::tools {

/// Measures GPU \p device (-1: the current one) with every rank of the
/// calibration plans on it, and returns a topology description named
/// \p name, its measurements in comments above the keys.
Result<std::string> calibrateDevice(const std::string &name, int device);

} // namespace coll::tools

#endif // COLL_TOOLS_DEVICECALIBRATION_H
