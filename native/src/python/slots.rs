//! Attributes of the engine's slotted objects (`__slots__`: a topic's state, a consume
//! queue, a queue file, a segment) read and written at their place in the object, as
//! CPython's own member descriptor does, instead of a look-up by name on every call
//! (issue 31, part 4: about 200 instructions a read and 400 a write through
//! `getattr`/`setattr`, a few here).

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// Where a slot of one class sits in its instances. Use it only on an object whose
/// type is exactly that class (the callers check `get_type().is(..)` first).
#[derive(Clone, Copy)]
pub(crate) struct Slot(usize);

impl Slot {
    /// The slot `name` of `class` (declared by it or a base); a TypeError when it is
    /// not a plain object slot.
    pub(crate) fn of(class: &Bound<'_, PyType>, name: &str) -> PyResult<Slot> {
        let py = class.py();
        let descriptor = class.getattr(name)?;
        let member_type = py.import("types")?.getattr("MemberDescriptorType")?;
        if !descriptor.get_type().is(&member_type) {
            return Err(PyTypeError::new_err(format!("{name} is not a slot")));
        }
        // SAFETY: a `member_descriptor` (checked above) is a PyMemberDescrObject; its
        // `d_member` points into the PyMemberDef table of the class that declared the
        // slot, which lives as long as that class (held by the caller).
        let member =
            unsafe { &*(*descriptor.as_ptr().cast::<ffi::PyMemberDescrObject>()).d_member };
        if member.type_code != ffi::Py_T_OBJECT_EX
            || member.flags & ffi::Py_READONLY != 0
            || member.offset <= 0
        {
            return Err(PyTypeError::new_err(format!(
                "{name} is not an object slot"
            )));
        }
        Ok(Slot(member.offset as usize))
    }

    fn place(self, object: &Bound<'_, PyAny>) -> *mut *mut ffi::PyObject {
        // SAFETY: `object` is an instance of the slot's class (the caller's check), so
        // the offset is inside it and holds an object pointer or NULL (unset).
        unsafe { object.as_ptr().cast::<u8>().add(self.0).cast() }
    }

    /// The slot's value; None when unset.
    pub(crate) fn get<'py>(self, object: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
        // SAFETY: see `place`; the GIL is held (`object` is bound), and the value is
        // borrowed from the object and taken as a new reference.
        unsafe {
            let item = *self.place(object);
            if item.is_null() {
                None
            } else {
                Some(Bound::from_borrowed_ptr(object.py(), item))
            }
        }
    }

    /// The slot's value when it is an int `int_value` reads at its place, read without
    /// a reference taken to it; None when unset or another object (the caller reads it
    /// with `get`).
    #[inline]
    pub(crate) fn int_value(self, object: &Bound<'_, PyAny>) -> Option<i64> {
        // SAFETY: see `place`; the GIL is held, and the value (when set) is held by the
        // object, which the caller holds, for the read.
        unsafe {
            let item = *self.place(object);
            if item.is_null() {
                return None;
            }
            super::int_value_at(object.py(), item)
        }
    }

    /// Give the slot the int `value` by renewing the int it holds in place when the
    /// slot is its one holder (`renew_int_at`): true when done (else the caller sets a
    /// new one).
    #[inline]
    pub(crate) fn renew_int(self, object: &Bound<'_, PyAny>, value: u64) -> bool {
        // SAFETY: see `place`; the GIL is held, the value (when set) is live, held by the
        // object, which the caller holds; `renew_int_at` checks that it is its only one.
        unsafe {
            let item = *self.place(object);
            !item.is_null() && super::renew_int_at(object.py(), item, value)
        }
    }

    /// Store `value` in the slot, as `object.name = value`, and hand back the old value
    /// (None when unset) instead of letting it go: the caller may use it again.
    pub(crate) fn replace<'py>(
        self,
        object: &Bound<'py, PyAny>,
        value: Bound<'py, PyAny>,
    ) -> Option<Bound<'py, PyAny>> {
        // SAFETY: see `place`; the slot owns one reference to its value: the new one is
        // handed over, the old one (NULL when unset) handed to the caller.
        unsafe {
            let old = std::ptr::replace(self.place(object), value.into_ptr());
            Bound::from_owned_ptr_or_opt(object.py(), old)
        }
    }

    /// Store `value` in the slot (the old value let go), as `object.name = value`.
    pub(crate) fn set(self, object: &Bound<'_, PyAny>, value: Bound<'_, PyAny>) {
        // SAFETY: see `place`; the slot owns one reference to its value: the new one is
        // handed over, the old one released (a slot may be unset: NULL).
        unsafe {
            let old = std::ptr::replace(self.place(object), value.into_ptr());
            ffi::Py_XDECREF(old);
        }
    }
}
