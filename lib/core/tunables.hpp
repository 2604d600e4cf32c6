#pragma once
// Placeholder: the tunables registry is being written (issue #12 item 2).
