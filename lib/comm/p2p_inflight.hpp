#pragma once
// Placeholder: in-flight point-to-point transfers (issue #12 item 7).
