#pragma once
// Placeholder: shared test helpers (issue #12 item 9).
